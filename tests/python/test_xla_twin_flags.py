"""The XLA_FLAGS of the rounding rule's unfused twins (frontends/xla_twin.py):
the user's flags kept, fusion disabled beside the passes the user disabled
(XLA keeps one value of a flag), LLVM at optimization level 0, and the dump
in the twins' own folder."""
from ckpt_verify.frontends.xla_twin import twin_flags


def test_fusion_joins_the_passes_the_user_disabled_in_one_flag():
    flags = twin_flags("--xla_disable_hlo_passes=cse_barrier_expander --xla_cpu_enable_fast_math=false", "/d")
    assert flags.split().count("--xla_disable_hlo_passes=cse_barrier_expander,fusion") == 1
    assert sum(f.startswith("--xla_disable_hlo_passes=") for f in flags.split()) == 1
    assert "--xla_cpu_enable_fast_math=false" in flags.split()


def test_the_users_dump_is_replaced_by_the_twins_own():
    flags = twin_flags("--xla_dump_to=/mine --xla_dump_hlo_as_text", "/twins/dump").split()
    assert "--xla_dump_to=/mine" not in flags
    assert flags == ["--xla_disable_hlo_passes=fusion", "--xla_backend_optimization_level=0",
                     "--xla_dump_to=/twins/dump", "--xla_dump_hlo_as_text"]


def test_the_backend_optimization_level_is_the_twins():
    flags = twin_flags("--xla_backend_optimization_level=3", "/d").split()
    assert [f for f in flags if f.startswith("--xla_backend_optimization_level=")] == [
        "--xla_backend_optimization_level=0"]
