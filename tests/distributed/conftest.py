"""pytest setup for the distributed specifications: python/ and this folder
on the path, and one shared report per model and parallelism (a module
fixture), so each test states one behaviour without training again."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
sys.path.insert(0, HERE)
