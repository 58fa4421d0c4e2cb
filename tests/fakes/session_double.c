/* A stand-in for libiket_injection.so's in-process session C ABI (iket_profiling_session.h,
 * ABI 1.0), built by the tests with the system's C compiler: ctypes loads it exactly as it
 * loads NVIDIA's library, which needs a GPU driver. It behaves as the H100 showed
 * (docs/gpu/, docs/capture.md "What NVIDIA's session survives"): OptionsInit fills flags 0,
 * 256 timestamps a warp, a 512 MiB buffer, log level 1; Start prints the injection's own lines
 * on stdout as the H100's did (a warning at level 1, notes at 2); SaveTrace writes one trace
 * JSON (a copy of IKET_DOUBLE_TRACE); each handle is a session of its own, one active at a time.
 *
 * Environment: IKET_DOUBLE_TRACE (the trace SaveTrace copies), IKET_DOUBLE_CALLS (a file each
 * call's name and the options' values are appended to), IKET_DOUBLE_FAIL ("Start=8": that call
 * returns that result), IKET_DOUBLE_VERSION ("2.0": the ABI version it reports), IKET_DOUBLE_SKIPPED (N: that
 * many "could not inspect a CUDA module" lines at Start, as after a bf16 GEMM ran before it), and
 * IKET_DOUBLE_CRASH: how NVIDIA's library killed its process on the GPU, comma-separated:
 *   "start-after-destroy"  a Start of a session made after another was destroyed: SIGSEGV
 *   "budget-over=N"        a Stop (the collection) of a session of more than N timestamps a
 *                          warp: "free(): invalid next size (fast)", SIGABRT
 *   "start-after-load"     a Start after a CUDA module was loaded inside an earlier window (the
 *                          workload calls IketDoubleLoadModule() for its kernel's load): SIGSEGV
 *   "second-start"         any Start after the first of the process: SIGSEGV */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    uint32_t struct_size, flags;
    uint64_t max_ts_per_warp, device_buffer_size;
    const void *const *profiled_cuda_contexts;
    uint64_t num_profiled_cuda_contexts;
    uint32_t cluster_x;
    uint16_t cluster_y, cluster_z;
    uint32_t log_level;
} Options;

typedef struct {
    Options options;
    int active;
    int after_destroy; /* made after another session was destroyed */
} Session;

static Options current; /* the options of the last call, for IKET_DOUBLE_CALLS */
static int destroyed = 0, starts = 0, loaded_in_window = 0, any_active = 0;

static uint32_t result(const char *name) {
    const char *log = getenv("IKET_DOUBLE_CALLS");
    if (log) {
        FILE *f = fopen(log, "a");
        if (f) {
            fprintf(f, "%s %u %llu %llu %u %u %u,%u,%u\n", name, current.flags,
                    (unsigned long long)current.max_ts_per_warp,
                    (unsigned long long)current.device_buffer_size, current.log_level,
                    current.struct_size, current.cluster_x, current.cluster_y, current.cluster_z);
            fclose(f);
        }
    }
    const char *fail = getenv("IKET_DOUBLE_FAIL");
    size_t n = strlen(name);
    if (fail && strncmp(fail, name, n) == 0 && fail[n] == '=') return (uint32_t)atoi(fail + n + 1);
    return 0;
}

/* The value of crash rule ``rule`` in IKET_DOUBLE_CRASH ("" for a rule without one), or NULL. */
static const char *crash_rule(const char *rule) {
    const char *all = getenv("IKET_DOUBLE_CRASH");
    size_t n = strlen(rule);
    for (const char *at = all; at && *at;) {
        if (strncmp(at, rule, n) == 0 && (at[n] == ',' || at[n] == '\0' || at[n] == '='))
            return at[n] == '=' ? at + n + 1 : "";
        at = strchr(at, ',');
        if (at) at++;
    }
    return NULL;
}

static void crash(int sig, const char *said) {
    if (said) fprintf(stderr, "%s\n", said);
    fflush(NULL);
    signal(sig, SIG_DFL);
    raise(sig);
}

/* The injection's own lines, as the H100 printed them (docs/gpu/issue51_h100: s_plain.out.txt). */
static void say(uint32_t level, const char *line) {
    if (current.log_level >= level) {
        printf("[2026-12-07 01:32:00.668] [IketInjectionManager] [%s] %s\n", level >= 2 ? "info" : "warning", line);
        fflush(stdout);
    }
}

uint32_t IketProfilingSessionGetApiVersion(uint32_t *major, uint32_t *minor) {
    const char *v = getenv("IKET_DOUBLE_VERSION");
    *major = v ? (uint32_t)atoi(v) : 1;
    *minor = 0;
    return 0;
}

uint32_t IketProfilingSessionOptionsInit(Options *o) {
    uint32_t size = o->struct_size;
    memset(o, 0, sizeof(*o));
    o->struct_size = size;
    o->max_ts_per_warp = 256;
    o->device_buffer_size = 536870912ULL;
    o->log_level = 1;
    return result("OptionsInit");
}

uint32_t IketProfilingSessionCreate(void **handle) {
    uint32_t r = result("Create");
    if (r == 0) {
        Session *s = calloc(1, sizeof(Session));
        s->options.max_ts_per_warp = 256;
        s->options.device_buffer_size = 536870912ULL;
        s->options.log_level = 1;
        s->after_destroy = destroyed;
        *handle = s;
    }
    return r;
}

uint32_t IketProfilingSessionSetOptions(void *handle, const Options *o) {
    Session *s = handle;
    if (!s || !o) return 1; /* INVALID_ARGUMENT */
    if (s->active) return 8; /* INVALID_STATE: the session must be inactive */
    current = *o;
    uint32_t r = result("SetOptions");
    if (r == 0) s->options = *o;
    return r;
}

uint32_t IketProfilingSessionStart(void *handle) {
    Session *s = handle;
    if (!s) return 1;
    current = s->options;
    uint32_t r = result("Start");
    if (r != 0) return r;
    if (any_active) return 8; /* one active session a process */
    if (crash_rule("second-start") && starts > 0) crash(SIGSEGV, NULL);
    if (crash_rule("start-after-destroy") && s->after_destroy) crash(SIGSEGV, NULL);
    if (crash_rule("start-after-load") && loaded_in_window) crash(SIGSEGV, NULL);
    starts++;
    s->active = any_active = 1;
    say(1, "IKET could not enable optional CUDA compatibility support (error 1: \"invalid argument\"). "
           "Some CUDA operations may be unavailable while profiling.");
    say(2, "IKET prepared 1 existing CUDA contexts and 20 loaded modules for profiling.");
    const char *skipped = getenv("IKET_DOUBLE_SKIPPED"); /* modules loaded before Start */
    for (int i = skipped ? atoi(skipped) : 0; i > 0; i--)
        say(1, "IKET could not inspect a CUDA module for instrumentation; the module will be skipped");
    say(2, "IKET profiling session started.");
    return 0;
}

uint32_t IketProfilingSessionStop(void *handle) {
    Session *s = handle;
    if (!s) return 1;
    current = s->options;
    uint32_t r = result("Stop");
    if (r != 0) return r;
    const char *over = crash_rule("budget-over");
    if (s->active && over && *over && s->options.max_ts_per_warp > strtoull(over, NULL, 10)) {
        say(2, "IKET profiling session completed with trace data for 1 CUDA launches.");
        crash(SIGABRT, "free(): invalid next size (fast)");
    }
    if (s->active) say(2, "IKET profiling session completed with trace data for 1 CUDA launches.");
    s->active = any_active = 0;
    return 0;
}

uint32_t IketProfilingSessionClearTraceData(void *handle) {
    Session *s = handle;
    if (!s) return 1;
    if (s->active) return 8;
    return result("ClearTraceData");
}

uint32_t IketProfilingSessionSaveTrace(void *handle, const char *path) {
    Session *s = handle;
    if (!s || !path) return 1;
    uint32_t r = result("SaveTrace");
    if (r != 0) return r;
    const char *from = getenv("IKET_DOUBLE_TRACE");
    FILE *in = from ? fopen(from, "rb") : NULL;
    FILE *out = fopen(path, "wb");
    if (!in || !out) {
        if (in) fclose(in);
        if (out) fclose(out);
        return 13; /* IO_ERROR */
    }
    char buffer[65536];
    size_t n;
    int failed = 0;
    while ((n = fread(buffer, 1, sizeof buffer, in)) > 0)
        if (fwrite(buffer, 1, n, out) != n) failed = 1;
    fclose(in);
    if (fclose(out) != 0) failed = 1;
    return failed ? 13 : 0; /* IO_ERROR: a full disk, as the library says it */
}

uint32_t IketProfilingSessionDestroy(void *handle) {
    Session *s = handle;
    if (!s) return 1;
    current = s->options;
    uint32_t r = result("Destroy");
    if (r != 0) return r;
    if (s->active) any_active = 0; /* an active session is stopped first */
    free(s);
    destroyed = 1;
    return 0;
}

/* The stand-in's own: the workload's kernel module was loaded (a kernel compiled and run). */
void IketDoubleLoadModule(void) {
    if (any_active) loaded_in_window = 1;
}
