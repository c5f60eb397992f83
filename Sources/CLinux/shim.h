#ifndef LOCKBOX_CLINUX_SHIM_H
#define LOCKBOX_CLINUX_SHIM_H
// Linux headers that Glibc's Swift module does not cover.
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

// prctl is variadic, which Swift cannot call; this fixed-arity wrapper can be.
static inline int lockbox_prctl_set_dumpable(int value) {
    return prctl(PR_SET_DUMPABLE, (unsigned long)value, 0UL, 0UL, 0UL);
}

static inline int lockbox_prctl_get_dumpable(void) {
    return prctl(PR_GET_DUMPABLE, 0UL, 0UL, 0UL, 0UL);
}

// The calling thread's kernel ID (what setpriority(PRIO_PROCESS, …) takes to change one thread's
// nice value); syscall is variadic too.
static inline long lockbox_gettid(void) {
    return syscall(SYS_gettid);
}
#endif
