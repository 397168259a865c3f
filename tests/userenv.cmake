# The package as a user installs it (label userenv): one `pip install
# <checkout>` into a second venv whose torch is 2.9.0, not the pin, then the
# user-facing Python specifications against the installed package alone
# (scripts/test-user-env.sh says how). Skipped, with the reason, without
# .venv-xla (CKPT_NO_XLA=1).
add_test(NAME userenv.pip_install
  COMMAND bash ${CMAKE_SOURCE_DIR}/scripts/test-user-env.sh ${CMAKE_BINARY_DIR}/user-env)
set_tests_properties(userenv.pip_install PROPERTIES LABELS "userenv;python" SKIP_RETURN_CODE 77 TIMEOUT 2400)
