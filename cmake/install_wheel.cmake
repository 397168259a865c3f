# install_wheel: what `pip install` puts into a venv (scikit-build-core,
# pyproject.toml at the repository root), from a judge-only build:
#   ckpt_verify/bin/ckpt-verify    the torch-free judge, found by
#                                  `import ckpt_verify` (judge.find_judge)
#   <venv>/bin/ckpt-verify         the same binary on PATH
#   .../share/ckpt-verify/scripts  the gnuplot scripts, beside each copy
#                                  (cli_scripts_dir: ../share/ckpt-verify/scripts)
#   ckpt_verify/native/            the counting allocator's sources, built
#                                  against the user's own torch at first use
#                                  (python/ckpt_verify/memory.py)
# The Python package itself is copied by scikit-build-core (wheel.packages).
file(GLOB CKPT_PLOT_SCRIPTS ${CMAKE_SOURCE_DIR}/scripts/plot_*.gp)
set(CKPT_NATIVE_SOURCES harness/aten/counting_allocator.cpp harness/aten/counting_allocator.h
  harness/memory_limit.c harness/memory_limit.h)
if(DEFINED SKBUILD_PLATLIB_DIR)
  set(_pkg ${SKBUILD_PLATLIB_DIR}/ckpt_verify)
  set(_bin ${SKBUILD_SCRIPTS_DIR})
  set(_data ${SKBUILD_DATA_DIR})
else()
  # A plain `cmake --install` (tests of the install layout): a prefix tree.
  set(_pkg ${CMAKE_INSTALL_PREFIX}/ckpt_verify)
  set(_bin ${CMAKE_INSTALL_PREFIX}/bin)
  set(_data ${CMAKE_INSTALL_PREFIX})
endif()
install(TARGETS ckpt-verify DESTINATION ${_pkg}/bin)
install(FILES ${CKPT_PLOT_SCRIPTS} DESTINATION ${_pkg}/share/ckpt-verify/scripts)
install(TARGETS ckpt-verify DESTINATION ${_bin})
install(FILES ${CKPT_PLOT_SCRIPTS} DESTINATION ${_data}/share/ckpt-verify/scripts)
install(FILES ${CKPT_NATIVE_SOURCES} DESTINATION ${_pkg}/native)
