/* text (harness/text.h): heap strings that grow without bound, read "" when
 * empty, take arguments that point into themselves, and on an allocation
 * failure (injected from outside through text_set_allocator) keep what they
 * had, mark themselves failed and put the failure in the error slot. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "error.h"
#include "text.h"

static void an_empty_text_reads_as_empty(void **state)
{
    (void)state;
    struct text t = {0};
    assert_string_equal(text_str(&t), "");
    assert_int_equal(text_len(&t), 0);
    assert_int_equal(text_check(&t, "t"), ST_OK);
    text_free(&t);
    assert_string_equal(text_str(&t), "");
}

static void a_text_grows_past_several_kilobytes_whole(void **state)
{
    (void)state;
    struct text t = {0};
    char piece[101];
    for (int i = 0; i < 100; i++)
        piece[i] = (char)('a' + i % 26);
    piece[100] = '\0';
    for (int i = 0; i < 300; i++) /* 30,000 bytes in 300 appends */
        assert_int_equal(text_append(&t, piece), ST_OK);
    assert_int_equal(text_appendf(&t, "|%d|%s", 42, "end of text"), ST_OK);
    const char *tail = "|42|end of text";
    assert_int_equal(text_len(&t), 30000 + strlen(tail));
    assert_int_equal(strlen(text_str(&t)), text_len(&t));
    for (int i = 0; i < 300; i++)
        assert_memory_equal(text_str(&t) + 100 * i, piece, 100);
    assert_string_equal(text_str(&t) + 30000, tail);
    text_free(&t);
}

static void set_and_setf_replace_the_whole_text(void **state)
{
    (void)state;
    struct text t = {0};
    assert_int_equal(text_set(&t, "first"), ST_OK);
    assert_int_equal(text_setf(&t, "%s-%03d", "second", 7), ST_OK);
    assert_string_equal(text_str(&t), "second-007");
    text_clear(&t);
    assert_string_equal(text_str(&t), "");
    text_free(&t);
}

static void prepend_puts_text_in_front(void **state)
{
    (void)state;
    struct text t = {0};
    assert_int_equal(text_set(&t, "world"), ST_OK);
    assert_int_equal(text_prepend(&t, ", "), ST_OK);
    assert_int_equal(text_prependf(&t, "%s", "hello"), ST_OK);
    assert_string_equal(text_str(&t), "hello, world");
    text_free(&t);
}

static void arguments_may_point_into_the_text_itself(void **state)
{
    (void)state;
    struct text t = {0};
    assert_int_equal(text_set(&t, "ab"), ST_OK);
    for (int i = 0; i < 12; i++) /* doubles each time: 2 * 4096 bytes, moved by every growth */
        assert_int_equal(text_appendf(&t, "%s", text_str(&t)), ST_OK);
    assert_int_equal(text_len(&t), 2u << 12);
    for (size_t i = 0; i < text_len(&t); i++)
        assert_int_equal(text_str(&t)[i], i % 2 ? 'b' : 'a');
    assert_int_equal(text_setf(&t, "[%.4s]", text_str(&t)), ST_OK);
    assert_string_equal(text_str(&t), "[abab]");
    assert_int_equal(text_prepend(&t, text_str(&t) + 1), ST_OK);
    assert_string_equal(text_str(&t), "abab][abab]");
    assert_int_equal(text_set(&t, text_str(&t) + 6), ST_OK);
    assert_string_equal(text_str(&t), "abab]");
    text_free(&t);
}

/* The injected allocator: succeeds `allocations_left` times, then fails. */
static int allocations_left;

static void *faulty_realloc(void *ptr, size_t size)
{
    if (allocations_left <= 0)
        return NULL;
    allocations_left--;
    return realloc(ptr, size);
}

static void out_of_memory_keeps_the_text_and_reaches_the_error_slot(void **state)
{
    (void)state;
    struct text t = {0};
    assert_int_equal(text_set(&t, "kept"), ST_OK);
    text_set_allocator(faulty_realloc);
    allocations_left = 0;
    error_clear();
    char big[4096];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    int st = text_append(&t, big);
    int formatted = text_appendf(&t, "%s", "y");
    text_set_allocator(NULL);
    assert_int_equal(st, ST_INTERNAL);
    assert_int_equal(formatted, ST_INTERNAL);
    assert_non_null(strstr(error_message(), "out of memory"));
    assert_string_equal(text_str(&t), "kept");
    assert_true(t.failed);
    error_clear();
    /* Sticky: a later change that succeeds does not hide the loss. */
    assert_int_equal(text_append(&t, "!"), ST_OK);
    assert_int_equal(text_check(&t, "the reason"), ST_INTERNAL);
    assert_non_null(strstr(error_message(), "out of memory composing the reason"));
    text_free(&t);
    assert_int_equal(text_check(&t, "t"), ST_OK);
}

static void a_failure_partway_through_growth_is_reported(void **state)
{
    (void)state;
    struct text t = {0};
    text_set_allocator(faulty_realloc);
    allocations_left = 3;
    int st = ST_OK;
    for (int i = 0; i < 64 && !st; i++)
        st = text_append(&t, "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef");
    text_set_allocator(NULL);
    assert_int_equal(st, ST_INTERNAL);
    assert_true(t.failed);
    assert_int_equal(strlen(text_str(&t)), text_len(&t));
    assert_true(text_len(&t) > 0);
    text_free(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(an_empty_text_reads_as_empty),
        cmocka_unit_test(a_text_grows_past_several_kilobytes_whole),
        cmocka_unit_test(set_and_setf_replace_the_whole_text),
        cmocka_unit_test(prepend_puts_text_in_front),
        cmocka_unit_test(arguments_may_point_into_the_text_itself),
        cmocka_unit_test(out_of_memory_keeps_the_text_and_reaches_the_error_slot),
        cmocka_unit_test(a_failure_partway_through_growth_is_reported),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
