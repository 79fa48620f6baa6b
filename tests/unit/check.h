/*
 * check.h - the few assertion macros the C unit tests use.
 *
 * CHECK(cond) counts a failure and prints the line; each test program
 * ends with TEST_DONE(), which prints "N passed, N failed" and returns 1
 * when anything failed.  SKIP(why) exits with 77 (automake: skipped).
 */
#ifndef MK_TEST_CHECK_H
#define MK_TEST_CHECK_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int check_passed, check_failed;

#define CHECK(cond)                                                          \
    do {                                                                     \
        if (cond) {                                                          \
            check_passed++;                                                  \
        } else {                                                             \
            check_failed++;                                                  \
            fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);  \
        }                                                                    \
    } while (0)

#define CHECK_RES(call, expect)                                              \
    do {                                                                     \
        mkResult_t r_ = (call);                                              \
        if (r_ == (expect)) {                                                \
            check_passed++;                                                  \
        } else {                                                             \
            check_failed++;                                                  \
            fprintf(stderr, "FAIL %s:%d: %s returned %s (%d), expected %s\n",\
                    __FILE__, __LINE__, #call, mkGetErrorString(r_), r_,     \
                    #expect);                                                \
        }                                                                    \
    } while (0)

#define CHECK_CONTAINS(str, sub)                                             \
    do {                                                                     \
        const char *s_ = (str);                                              \
        if (s_ && strstr(s_, sub)) {                                         \
            check_passed++;                                                  \
        } else {                                                             \
            check_failed++;                                                  \
            fprintf(stderr, "FAIL %s:%d: \"%s\" does not contain \"%s\"\n",  \
                    __FILE__, __LINE__, s_ ? s_ : "(null)", sub);            \
        }                                                                    \
    } while (0)

#define SKIP(why)                                                            \
    do {                                                                     \
        printf("SKIP: %s\n", why);                                           \
        exit(77);                                                            \
    } while (0)

#define TEST_DONE()                                                          \
    do {                                                                     \
        printf("%d passed, %d failed\n", check_passed, check_failed);        \
        return check_failed ? 1 : 0;                                         \
    } while (0)

#endif
