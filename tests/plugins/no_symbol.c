/* A shared library that is not a plugin: no ckpt_verify_plugin symbol. */
int not_a_plugin(void);

int not_a_plugin(void) { return 1; }
