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

// Names the calling thread (what `ps -L`, `top -H` and /proc/PID/task/TID/comm show; the kernel
// keeps 15 bytes).
static inline int lockbox_prctl_set_thread_name(const char *name) {
    return prctl(PR_SET_NAME, (unsigned long)name, 0UL, 0UL, 0UL);
}

// pipe2 and posix_spawn_file_actions_addclosefrom_np (glibc 2.34) are declared only under
// _GNU_SOURCE, which Glibc's Swift module is not built with.
#include <fcntl.h>
#include <spawn.h>
extern int pipe2(int fds[2], int flags);
extern int posix_spawn_file_actions_addclosefrom_np(posix_spawn_file_actions_t *actions, int from);

// A pipe whose two ends close on exec.
static inline int lockbox_pipe_cloexec(int fds[2]) {
    return pipe2(fds, O_CLOEXEC);
}

// Has the spawned program start with no descriptor from `from` up (what Foundation's Process did).
static inline int lockbox_spawn_close_from(posix_spawn_file_actions_t *actions, int from) {
    return posix_spawn_file_actions_addclosefrom_np(actions, from);
}

// The calling thread's kernel ID (what setpriority(PRIO_PROCESS, …) takes to change one thread's
// nice value); syscall is variadic too.
static inline long lockbox_gettid(void) {
    return syscall(SYS_gettid);
}
// How many CPUs this process may run on: its affinity mask (`taskset`, a container's cpuset),
// read with the raw system call (glibc's sched_getaffinity and CPU_COUNT need _GNU_SOURCE and a
// macro, which Swift cannot call); 0 if the kernel would not say.
static inline int lockbox_affinity_cpu_count(void) {
    unsigned long mask[128];  // 8192 CPUs
    long bytes = syscall(SYS_sched_getaffinity, 0, sizeof(mask), mask);
    if (bytes <= 0) return 0;
    int count = 0;
    for (long i = 0; i < bytes / (long)sizeof(unsigned long); i++) count += __builtin_popcountl(mask[i]);
    return count;
}
// The ID of the mount a file is on, through statx(2)'s STATX_MNT_ID (Linux 5.8); 0 where the
// kernel does not say. A file whose mount differs from its folder's is a mount point itself (a
// single file bind-mounted). Of the open file `fd`, and of the file at `path`.
#include <linux/stat.h>
#ifndef AT_EMPTY_PATH
#define AT_EMPTY_PATH 0x1000
#endif
static inline unsigned long long lockbox_statx_mount_id(int dirfd, const char *name, int flags) {
    struct statx status;
    if (syscall(SYS_statx, dirfd, name, flags, STATX_MNT_ID, &status) != 0) return 0;
    return (status.stx_mask & STATX_MNT_ID) ? status.stx_mnt_id : 0;
}
static inline unsigned long long lockbox_mount_id_of_descriptor(int fd) {
    return lockbox_statx_mount_id(fd, "", AT_EMPTY_PATH);
}
static inline unsigned long long lockbox_mount_id_of_path(const char *path) {
    return lockbox_statx_mount_id(AT_FDCWD, path, 0);
}
// A close-on-exec in-memory file that can be sealed (memfd_create(2), Linux 3.17), through the
// raw system call (glibc declares it only under _GNU_SOURCE); -1 with errno on failure.
#ifndef MFD_CLOEXEC
#define MFD_CLOEXEC 0x0001U
#endif
#ifndef MFD_ALLOW_SEALING
#define MFD_ALLOW_SEALING 0x0002U
#endif
static inline int lockbox_memfd_secret(void) {
    return (int)syscall(SYS_memfd_create, "lockbox-secret", MFD_CLOEXEC | MFD_ALLOW_SEALING);
}
// Seals a memfd against writing, growing, shrinking and further seals (F_ADD_SEALS); fcntl is
// variadic and these constants need _GNU_SOURCE.
static inline int lockbox_memfd_seal(int fd) {
    return fcntl(fd, 1024 + 9 /* F_ADD_SEALS */, 0x0001 | 0x0002 | 0x0004 | 0x0008 /* F_SEAL_SEAL|SHRINK|GROW|WRITE */);
}
// A descriptor that becomes readable when process `pid` ends (pidfd_open(2), Linux 5.3); -1
// with errno where the kernel lacks it.
static inline int lockbox_pidfd_open(int pid) {
#ifdef SYS_pidfd_open
    return (int)syscall(SYS_pidfd_open, pid, 0);
#else
    return -1;
#endif
}
#endif
