"""The adversarial suite (issue 42): broken and correct checkpoints of the
kinds people ship, each module one bug class, each test asserting the
verdict verify() gives or the refusal it raises. Runs are real: torch
models, torch's and hand-written checkpoints, the C judge
($CKPT_VERIFY, else the tree's build/ckpt-verify)."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "python"))
sys.path.insert(0, HERE)
