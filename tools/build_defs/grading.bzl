"""The symbol rules the grader applies to a submission's compiled objects (tools/grader/README.md).

Each lab's rules are declared once, in its LAB struct (labs/<lab>/lab.bzl), beside its student files:

    symbol_margin = ["@files", "XXH*"],      # what a student may reference beyond the stubs and the solution
    symbol_needs = [],                        # forbidden symbols this lab legitimately needs

`lab()` writes them, with the groups below expanded, into //labs/<lab>:symbol_rules (JSON); `lab_solution()`
writes the undefined symbols of the solution's and the stubs' objects into //solutions/<lab>:reference_symbols.
The grader (tools/grader/symbols.cc) reads both:
  references   every undefined symbol of a student object is referenced by the stubs or the solution, or
               matches the margin -- and is not FORBIDDEN unless the lab needs it;
  definitions  a student object defines symbols only in the lab's namespace (distlab::<lab>) or with
               internal linkage; weak definitions (the template instantiations and inline functions a compiler
               emits) may be in other namespaces, never in the test harness's (testing::, distlab::testing::)
               nor at global scope;
  sections     no prioritised constructors (.init_array.N, .ctors, .preinit_array): they would run before
               the harness takes its record channel;
  code         no raw system-call instructions (syscall, sysenter, int $0x80);
  strings      no FORBIDDEN_STRINGS in the object (paths into /proc, the record channel's names).

Margin entries: "ns::*" matches C++ symbols in namespace ns (components may be globs: "icu_*::*"); an entry
starting with "_Z" is a glob on the mangled name; any other entry is a glob on a C symbol's name; "@group"
names a group below.
"""

SYMBOL_GROUPS = {
    # What the compiler and the C++ runtime reference for ordinary C++ code.
    "c++": [
        "std::*",
        "__gnu_cxx::*",
        "__cxxabiv1::*",
        "_Znw*",  # operator new
        "_Zna*",  # operator new[]
        "_Zdl*",  # operator delete
        "_Zda*",  # operator delete[]
        "__cxa_*",
        "__gxx_personality_v0",
        "_Unwind_*",
        "__dso_handle",
        "_GLOBAL_OFFSET_TABLE_",
        "__stack_chk_fail",
        "__stack_chk_guard",
        "__libc_single_threaded",
        "__errno_location",
        "__tls_get_addr",
        "__assert_fail",
        "__*_chk",  # _FORTIFY_SOURCE's checked variants of string and stdio functions
    ],
    # The C library's computing, string, memory, time, stdio-to-stdout/stderr and thread functions.
    "libc": [
        "mem*",
        "str*",
        "wcs*",
        "wmem*",
        "ato*",
        "is*",
        "to*",
        "__ctype_*",
        "malloc",
        "calloc",
        "realloc",
        "free",
        "aligned_alloc",
        "posix_memalign",
        "memalign",
        "qsort",
        "bsearch",
        "abs",
        "labs",
        "llabs",
        "div",
        "ldiv",
        "rand",
        "rand_r",
        "srand",
        "random",
        "srandom",
        "drand48",
        "lrand48",
        "srand48",
        "time",
        "clock",
        "clock_gettime",
        "gettimeofday",
        "nanosleep",
        "usleep",
        "sleep",
        "sched_yield",
        "localtime_r",
        "gmtime_r",
        "localeconv",
        "printf",
        "vprintf",
        "fprintf",
        "vfprintf",
        "sprintf",
        "vsprintf",
        "snprintf",
        "vsnprintf",
        "sscanf",
        "vsscanf",
        "puts",
        "putchar",
        "fputs",
        "fputc",
        "putc",
        "fflush",
        "fwrite",
        "perror",
        "stdout",
        "stderr",
        "exit",
        "_exit",
        "_Exit",
        "abort",
        "atexit",
        "getpid",
        "pthread_mutex_*",
        "pthread_cond_*",
        "pthread_rwlock_*",
        "pthread_once",
        "pthread_self",
        "pthread_equal",
        "pthread_key_*",
        "pthread_getspecific",
        "pthread_setspecific",
        "pthread_create",
        "pthread_join",
        "pthread_detach",
        "pthread_attr_*",
        "sysconf",
        "get_nprocs",
    ],
    "libm": [
        "sqrt*",
        "cbrt*",
        "exp*",
        "log*",
        "pow*",
        "sin*",
        "cos*",
        "tan*",
        "asin*",
        "acos*",
        "atan*",
        "erf*",
        "fabs*",
        "floor*",
        "ceil*",
        "round*",
        "lround*",
        "llround*",
        "lrint*",
        "llrint*",
        "rint*",
        "nearbyint*",
        "trunc*",
        "fmod*",
        "remainder*",
        "hypot*",
        "fma*",
        "fmax*",
        "fmin*",
        "ldexp*",
        "frexp*",
        "modf*",
        "nextafter*",
        "copysign*",
        "lgamma*",
        "tgamma*",
        "__isnan*",
        "__isinf*",
        "__finite*",
        "__fpclassify*",
    ],
    # Files and directories: for a lab whose code reads or writes them (dataloader, dedup).
    "files": [
        "open",
        "open64",
        "openat",
        "creat",
        "close",
        "read",
        "write",
        "readv",
        "writev",
        "pread*",
        "pwrite*",
        "lseek*",
        "fstat*",
        "stat*",
        "lstat*",
        "__fxstat*",
        "__xstat*",
        "fsync",
        "fdatasync",
        "ftruncate*",
        "truncate*",
        "posix_fallocate*",
        "unlink",
        "rename",
        "mkdir",
        "rmdir",
        "mkstemp*",
        "opendir",
        "readdir*",
        "closedir",
        "fopen*",
        "fdopen",
        "fclose",
        "fread",
        "fgets",
        "fgetc",
        "getc",
        "fseek*",
        "ftell*",
        "fileno",
        "feof",
        "ferror",
        "getline",
        "getdelim",
    ],
    # Pipes, processes, signals and shared memory: for a lab whose code forks workers (the dataloader).
    "processes": [
        "pipe",
        "pipe2",
        "dup",
        "dup2",
        "dup3",
        "poll",
        "ppoll",
        "select",
        "pselect",
        "fcntl*",
        "mmap*",
        "munmap",
        "msync",
        "mremap",
        "madvise",
        "shm_open",
        "shm_unlink",
        "fork",
        "waitpid",
        "wait",
        "waitid",
        "wait4",
        "kill",
        "getppid",
        "raise",
        "alarm",
        "signal",
        "sigaction",
        "sig*set",
        "sigismember",
        "sigprocmask",
        "pthread_sigmask",
        "sigtimedwait",
        "sigwait*",
        "sigsuspend",
        "socketpair",
        "strsignal",
        "pthread_kill",
    ],
}

# What the labs get by default, before their own margin.
DEFAULT_SYMBOL_MARGIN = ["@c++", "@libc", "@libm", "absl::*", "distlab::*"]

# Refused in every lab unless its LAB struct lists them in symbol_needs -- even when the solution uses them.
FORBIDDEN_SYMBOLS = {
    "environment access (the grader hands a lab nothing through the environment)": [
        "getenv",
        "secure_getenv",
        "environ",
        "__environ",
        "_environ",
        "setenv",
        "putenv",
        "unsetenv",
        "clearenv",
    ],
    "reading the process's start-up data": [
        "program_invocation_name",
        "program_invocation_short_name",
        "__progname",
        "__progname_full",
        "__libc_argv",
        "__libc_argc",
        "getauxval",
        "__libc_start_main",
    ],
    "raw system calls": ["syscall"],
    "dynamic loading and symbol lookup": [
        "dlopen",
        "dlmopen",
        "dlsym",
        "dlvsym",
        "dladdr",
        "dladdr1",
        "dlinfo",
        "dl_iterate_phdr",
        "_dl_*",
    ],
    "reading or writing other processes' memory": [
        "ptrace",
        "process_vm_readv",
        "process_vm_writev",
    ],
    "leaving the case's session, process group or namespaces": [
        "setsid",
        "setpgid",
        "setpgrp",
        "daemon",
        "prctl",
        "unshare",
        "setns",
        "clone",
        "clone3",
        "vfork",
    ],
    "running other programs": [
        "execve",
        "execveat",
        "execv",
        "execvp",
        "execvpe",
        "execl",
        "execlp",
        "execle",
        "fexecve",
        "system",
        "popen",
        "posix_spawn",
        "posix_spawnp",
    ],
    "changing memory protection (patching code)": [
        "mprotect",
        "pkey_mprotect",
    ],
}

# Byte strings no student object may contain: paths into the process's own /proc entries (environment, command
# line, descriptors, memory) and the record channel's variable names.
FORBIDDEN_STRINGS = ["/proc/", "/dev/fd", "DISTLAB_RECORD", "DISTLAB_CASE"]

def symbol_rules_json(lab):
    """The JSON text of //labs/<lab>:symbol_rules for a LAB struct."""
    margin = []
    for entry in DEFAULT_SYMBOL_MARGIN + getattr(lab, "symbol_margin", []):
        if entry.startswith("@"):
            group = entry[1:]
            if group not in SYMBOL_GROUPS:
                fail("lab %s: symbol_margin names %s, not a group of tools/build_defs/grading.bzl (%s)" % (
                    lab.name,
                    entry,
                    ", ".join(SYMBOL_GROUPS.keys()),
                ))
            margin.extend(SYMBOL_GROUPS[group])
        else:
            margin.append(entry)
    needs = getattr(lab, "symbol_needs", [])
    forbidden = {}
    for why, names in FORBIDDEN_SYMBOLS.items():
        kept = [n for n in names if n not in needs]
        if kept:
            forbidden[why] = kept
    return json.encode({
        "lab": lab.name,
        "namespace": "distlab::" + lab.name,
        "margin": margin,
        "needs": needs,
        "forbidden": forbidden,
        "forbidden_namespaces": ["testing", "distlab::testing"],
        "forbidden_strings": FORBIDDEN_STRINGS,
    })
