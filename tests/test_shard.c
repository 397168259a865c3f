/* Unit tests for shard: parsing K/N and the round-robin slice. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "error.h"
#include "shard.h"

static void parses_k_of_n(void **state)
{
    (void)state;
    struct shard s = {0, 0};
    assert_int_equal(shard_parse("2/5", &s), ST_OK);
    assert_int_equal(s.k, 2);
    assert_int_equal(s.n, 5);
}

static void rejects_malformed_and_out_of_range(void **state)
{
    (void)state;
    static const char *const bad[] = {"", "1", "1/", "/2", "0/2", "3/2", "a/b", " 1/2", "1/2x", "-1/2", "+1/2",
                                      "1/100001", "1//2"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        struct shard s = {7, 7};
        assert_int_equal(shard_parse(bad[i], &s), ST_INPUT);
        assert_int_equal(s.k, 7); /* untouched on error */
    }
}

static void message_names_the_value(void **state)
{
    (void)state;
    struct shard s;
    assert_int_equal(shard_parse("3/2", &s), ST_INPUT);
    assert_string_equal(error_message(), "--shard: '3/2': K must not exceed N");
}

static void every_index_lands_in_exactly_one_shard(void **state)
{
    (void)state;
    for (int n = 1; n <= 7; n++)
        for (int index = 0; index < 50; index++) {
            int owners = 0;
            for (int k = 1; k <= n; k++) {
                struct shard s = {k, n};
                owners += shard_takes(&s, index);
            }
            assert_int_equal(owners, 1);
        }
}

static void slices_are_round_robin(void **state)
{
    (void)state;
    struct shard s = {2, 3};
    assert_false(shard_takes(&s, 0));
    assert_true(shard_takes(&s, 1));
    assert_false(shard_takes(&s, 2));
    assert_true(shard_takes(&s, 4));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(parses_k_of_n),
        cmocka_unit_test(rejects_malformed_and_out_of_range),
        cmocka_unit_test(message_names_the_value),
        cmocka_unit_test(every_index_lands_in_exactly_one_shard),
        cmocka_unit_test(slices_are_round_robin),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
