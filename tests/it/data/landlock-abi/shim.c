/*
 * Makes a process see an older Landlock ABI, for the ABI-floor test in jail_unavailable.rs.
 *
 * Preloaded (LD_PRELOAD) into the real squidbot binary, it replaces libc's syscall(): the
 * ABI query, landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION), answers the
 * number in SQUIDBOT_TEST_LANDLOCK_ABI; every other call goes to libc's own syscall(). Both
 * squidbot (tools/sandbox/ruleset.rs) and the landlock crate ask through syscall(), so they
 * see the same old kernel.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/syscall.h>

#define CREATE_RULESET_VERSION 1

long syscall(long number, ...)
{
    long arg[6];
    va_list args;
    va_start(args, number);
    /* Like libc's own wrapper, take six arguments whatever the call uses. */
    for (int i = 0; i < 6; i++)
        arg[i] = va_arg(args, long);
    va_end(args);
    if (number == SYS_landlock_create_ruleset && arg[0] == 0 && arg[1] == 0
        && arg[2] == CREATE_RULESET_VERSION) {
        const char *abi = getenv("SQUIDBOT_TEST_LANDLOCK_ABI");
        if (abi != NULL)
            return atol(abi);
    }
    static long (*real)(long, ...);
    if (real == NULL)
        real = (long (*)(long, ...))dlsym(RTLD_NEXT, "syscall");
    return real(number, arg[0], arg[1], arg[2], arg[3], arg[4], arg[5]);
}
