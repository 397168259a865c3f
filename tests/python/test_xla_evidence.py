"""xla_evidence reads XLA's HLO text and buffer assignment as docs/xla.md
says: recompute ops by the region named in their metadata (fused ones
included), opt-barrier values classed by who reads them, the schedule, the
bytes. Pure text: runs in the main environment, no torch_xla needed."""
from ckpt_verify import xla_evidence as xe

R1 = 'metadata={op_type="aten__mul" op_name="aten__mul" source_file="<ckptv_recompute_1>" source_line=2}'
R2 = 'metadata={op_type="aten__mul" op_name="aten__mul" source_file="<ckptv_recompute_2>" source_line=2}'
B1 = 'metadata={op_type="aten__mm" op_name="aten__mm" source_file="<ckptv_backward_1>" source_line=2}'
FWD = 'metadata={op_type="aten__mul" op_name="aten__mul" source_file="model.py" source_line=9}'

UNOPTIMIZED = f"""HloModule SyncTensorsGraph.9, entry_computation_layout={{(f32[4]{{0}})->f32[4]{{0}}}}

ENTRY %SyncTensorsGraph.9 (p0.1: f32[4], p1.2: f32[4], p2.3: f32[8]) -> (f32[4]) {{
  %p0.1 = f32[4]{{0}} parameter(0)
  %p1.2 = f32[4]{{0}} parameter(1)
  %p2.3 = f32[8]{{0}} parameter(2)
  %multiply.4 = f32[4]{{0}} multiply(f32[4]{{0}} %p0.1, f32[4]{{0}} %p0.1), {FWD}
  %tuple.5 = (f32[4]{{0}}, f32[4]{{0}}, f32[8]{{0}}) tuple(%p0.1, %p1.2, /*index=2*/%p2.3)
  %opt-barrier.6 = (f32[4]{{0}}, f32[4]{{0}}, f32[8]{{0}}) opt-barrier((f32[4]{{0}}, f32[4]{{0}}, f32[8]{{0}}) %tuple.5)
  %get-tuple-element.7 = f32[4]{{0}} get-tuple-element((f32[4]{{0}}, f32[4]{{0}}, f32[8]{{0}}) %opt-barrier.6), index=0
  %get-tuple-element.8 = f32[4]{{0}} get-tuple-element((f32[4]{{0}}, f32[4]{{0}}, f32[8]{{0}}) %opt-barrier.6), index=1
  %multiply.9 = f32[4]{{0}} multiply(f32[4]{{0}} %get-tuple-element.7, f32[4]{{0}} %get-tuple-element.7), {R1}
  %multiply.10 = f32[4]{{0}} multiply(f32[4]{{0}} %multiply.9, f32[4]{{0}} %get-tuple-element.8), {B1}
  %multiply.11 = f32[4]{{0}} multiply(f32[4]{{0}} %multiply.10, f32[4]{{0}} %multiply.4), {R2}
  ROOT %tuple.12 = (f32[4]{{0}}) tuple(f32[4]{{0}} %multiply.11)
}}
"""

# Region 2's recompute fused into one kernel and scheduled before region
# 1's backward; region 1's recompute merged away.
OPTIMIZED = f"""HloModule SyncTensorsGraph.9, is_scheduled=true, entry_computation_layout={{(f32[4]{{0}})->f32[4]{{0}}}}

%fused_computation (param_0.1: f32[4]) -> f32[4] {{
  %param_0.1 = f32[4]{{0}} parameter(0)
  ROOT %multiply.3 = f32[4]{{0}} multiply(f32[4]{{0}} %param_0.1, f32[4]{{0}} %param_0.1), {R2}
}}

ENTRY %SyncTensorsGraph.9 (p0.1: f32[4], p1.2: f32[4]) -> (f32[4]) {{
  %p0.1 = f32[4]{{0}} parameter(0)
  %p1.2 = f32[4]{{0}} parameter(1)
  %fusion = f32[4]{{0}} fusion(f32[4]{{0}} %p0.1), kind=kLoop, calls=%fused_computation, {R2}
  %multiply.10 = f32[4]{{0}} multiply(f32[4]{{0}} %fusion, f32[4]{{0}} %p1.2), {B1}
  ROOT %tuple.12 = (f32[4]{{0}}) tuple(f32[4]{{0}} %multiply.10)
}}
"""

BUFFERS = """BufferAssignment:
allocation 0: size 16, parameter 0, shape |f32[4]| at ShapeIndex {}:
allocation 1: size 16, parameter 1, shape |f32[4]| at ShapeIndex {}, maybe-live-out:
allocation 2: size 16, maybe-live-out:
allocation 3: size 64, preallocated-temp:
allocation 4: size 32, preallocated-temp:

Total bytes used: 144 (144B)
"""


def test_recompute_ops_are_counted_by_the_region_in_their_metadata():
    assert xe.recompute_ops_by_region(xe.load(UNOPTIMIZED)) == {1: 1, 2: 1}


def test_a_fused_recompute_op_survives_and_a_merged_one_is_gone():
    assert xe.recompute_ops_by_region(xe.load(OPTIMIZED)) == {2: 1}   # the op the fusion calls, not the fusion


def test_barrier_values_are_classed_by_who_reads_them():
    b = xe.barriers(xe.load(UNOPTIMIZED))
    assert (b.count, b.held_recompute_inputs, b.held_gradients, b.held_other) == (1, 1, 1, 1)
    assert b.held_other_bytes == 32
    assert b.other_values == ["p2.3 f32[8]{0} (parameter)"]


def test_index_markers_in_operand_lists_are_not_part_of_the_name():
    tuple5 = [i for i in xe.load(UNOPTIMIZED).instructions() if i.name == "tuple.5"][0]
    assert tuple5.operands == ["p0.1", "p1.2", "p2.3"]


def test_a_recompute_scheduled_before_the_backward_that_feeds_it_is_early():
    assert xe.load(OPTIMIZED).scheduled
    assert xe.regions_scheduled_early(xe.load(OPTIMIZED)) == 1


def test_buffer_assignment_is_summed_by_kind():
    b = xe.buffer_bytes(BUFFERS)
    assert (b.total, b.parameter, b.live_out, b.temp) == (144, 32, 16, 96)


def test_evidence_attributes_name_merged_regions(tmp_path):
    files = {}
    for kind, text in (("before", UNOPTIMIZED), ("after", OPTIMIZED), ("buffers", BUFFERS)):
        files[kind] = str(tmp_path / kind)
        (tmp_path / kind).write_text(text)
    attrs = xe.read_evidence(files, 2, "m").attrs()
    assert attrs["xla.regions_merged"] == 1
    assert attrs["xla.recompute_ops_per_region"] == "1:1->0, 2:1->1"
    assert attrs["xla.barriers"] == 1 and attrs["xla.barriers_optimized"] == 0
    assert attrs["xla.temp_bytes"] == 96


# A program as JAX lowers a jax.checkpoint: two calls of the same block,
# each replayed in the backward (`rematted_computation`) beside its backward
# (`checkpoint`); every call has the same name, so regions come from data flow.
J_RECOMPUTE = 'metadata={op_name="jit(step)/transpose(jvp(jvp()))/checkpoint/rematted_computation/mul"}'
J_BACKWARD = 'metadata={op_name="jit(step)/transpose(jvp(jvp()))/checkpoint/mul"}'
J_FORWARD = 'metadata={op_name="jit(step)/jvp()/mul"}'

JAX_UNOPTIMIZED = f"""HloModule jit_step, entry_computation_layout={{(f32[4]{{0}})->f32[4]{{0}}}}

ENTRY %main.1 (x.1: f32[4], g.2: f32[4]) -> (f32[4]) {{
  %x.1 = f32[4]{{0}} parameter(0)
  %g.2 = f32[4]{{0}} parameter(1)
  %mul.3 = f32[4]{{0}} multiply(%x.1, %x.1), {J_FORWARD}
  %mul.4 = f32[4]{{0}} multiply(%mul.3, %mul.3), {J_FORWARD}
  %remat2.5 = (f32[4]{{0}}, f32[4]{{0}}) tuple(%mul.3, %g.2)
  %remat2.6 = (f32[4]{{0}}, f32[4]{{0}}) opt-barrier(%remat2.5)
  %remat2.7 = f32[4]{{0}} get-tuple-element(%remat2.6), index=0
  %remat2.8 = f32[4]{{0}} get-tuple-element(%remat2.6), index=1
  %mul.9 = f32[4]{{0}} multiply(%remat2.7, %remat2.7), {J_RECOMPUTE}
  %mul.10 = f32[4]{{0}} multiply(%mul.9, %mul.9), {J_RECOMPUTE}
  %mul.11 = f32[4]{{0}} multiply(%mul.10, %remat2.8), {J_BACKWARD}
  %mul.12 = f32[4]{{0}} multiply(%x.1, %x.1), {J_RECOMPUTE}
  %mul.13 = f32[4]{{0}} multiply(%mul.12, %mul.11), {J_BACKWARD}
  ROOT %tuple.14 = (f32[4]{{0}}) tuple(%mul.13)
}}
"""


def test_jax_recompute_is_marked_by_its_rematted_computation_name_and_regions_by_data_flow():
    mod = xe.mark_jax(xe.load(JAX_UNOPTIMIZED), number_regions=True)
    assert xe.recompute_ops_by_region(mod) == {1: 2, 2: 1}


def test_jax_optimized_program_counts_its_recompute_as_one_total():
    mod = xe.mark_jax(xe.load(JAX_UNOPTIMIZED), number_regions=False)
    assert xe.recompute_ops_by_region(mod) == {0: 3} and not mod.regions_known


def test_jax_barrier_holds_a_recompute_input_and_a_value_only_the_backward_reads():
    b = xe.barriers(xe.mark_jax(xe.load(JAX_UNOPTIMIZED), number_regions=True))
    assert (b.count, b.held_recompute_inputs, b.held_gradients, b.held_other) == (1, 1, 1, 0)


def test_jax_regions_are_merged_only_when_no_recompute_op_is_left():
    ev = xe.Evidence(regions=2, recompute_ops_unoptimized={1: 2, 2: 1}, regions_known_optimized=False)
    ev.recompute_ops_optimized = {0: 1}
    assert ev.regions_merged == 0
    assert ev.attrs()["xla.recompute_ops_per_region"] == "1:2->?, 2:1->? (all: 3->1)"
    ev.recompute_ops_optimized = {}
    assert ev.regions_merged == 2


def test_dump_file_names_of_torch_xla_and_jax_give_their_module():
    assert xe._prefix("module_0007.SyncTensorsGraph.42.cpu_after_optimizations.txt") == \
        "module_0007.SyncTensorsGraph.42"
    assert xe._prefix("module_0028.jit_step.cpu_after_optimizations-buffer-assignment.txt") == "module_0028.jit_step"
    assert xe._prefix("module_0028.jit_step.before_optimizations.txt") == "module_0028.jit_step"
