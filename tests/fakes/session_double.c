/* A stand-in for libiket_injection.so's in-process session C ABI (iket_profiling_session.h,
 * ABI 1.0), built by the tests with the system's C compiler: ctypes loads it exactly as it
 * loads NVIDIA's library, which needs a GPU driver. It behaves as the H100 showed
 * (docs/gpu/issue51_h100/, RUN_IKET_NOTES.md): OptionsInit fills flags 0, 256 timestamps a
 * warp, a 512 MiB buffer, log level 1; Start prints the injection's own lines on stdout as the
 * H100's did (a warning at level 1, notes at 2); SaveTrace writes one trace JSON (a copy of IKET_DOUBLE_TRACE); Destroy ends it.
 *
 * Environment: IKET_DOUBLE_TRACE (the trace SaveTrace copies), IKET_DOUBLE_CALLS (a file each
 * call's name and the options' values are appended to), IKET_DOUBLE_FAIL ("Start=8": that call
 * returns that result), IKET_DOUBLE_VERSION ("2.0": the ABI version it reports), IKET_DOUBLE_SKIPPED (N: that
 * many "could not inspect a CUDA module" lines at Start, as after a bf16 GEMM ran before it). */
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

static Options current;
static int active = 0;

static uint32_t result(const char *name) {
    const char *log = getenv("IKET_DOUBLE_CALLS");
    if (log) {
        FILE *f = fopen(log, "a");
        if (f) {
            fprintf(f, "%s %u %llu %llu %u %u\n", name, current.flags,
                    (unsigned long long)current.max_ts_per_warp,
                    (unsigned long long)current.device_buffer_size, current.log_level,
                    current.struct_size);
            fclose(f);
        }
    }
    const char *fail = getenv("IKET_DOUBLE_FAIL");
    size_t n = strlen(name);
    if (fail && strncmp(fail, name, n) == 0 && fail[n] == '=') return (uint32_t)atoi(fail + n + 1);
    return 0;
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
    if (r == 0) *handle = (void *)&current;
    return r;
}

uint32_t IketProfilingSessionSetOptions(void *handle, const Options *o) {
    current = *o;
    return result("SetOptions");
}

uint32_t IketProfilingSessionStart(void *handle) {
    uint32_t r = result("Start");
    if (r == 0) {
        active = 1;
        say(1, "IKET could not enable optional CUDA compatibility support (error 1: \"invalid argument\"). "
               "Some CUDA operations may be unavailable while profiling.");
        say(2, "IKET prepared 1 existing CUDA contexts and 20 loaded modules for profiling.");
        const char *skipped = getenv("IKET_DOUBLE_SKIPPED"); /* modules loaded before Start */
        for (int i = skipped ? atoi(skipped) : 0; i > 0; i--)
            say(1, "IKET could not inspect a CUDA module for instrumentation; the module will be skipped");
        say(2, "IKET profiling session started.");
    }
    return r;
}

uint32_t IketProfilingSessionStop(void *handle) {
    uint32_t r = result("Stop");
    if (r == 0 && active) say(2, "IKET profiling session completed with trace data for 1 CUDA launches.");
    active = 0;
    return r;
}

uint32_t IketProfilingSessionClearTraceData(void *handle) { return result("ClearTraceData"); }

uint32_t IketProfilingSessionSaveTrace(void *handle, const char *path) {
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
    while ((n = fread(buffer, 1, sizeof buffer, in)) > 0) fwrite(buffer, 1, n, out);
    fclose(in);
    fclose(out);
    return 0;
}

uint32_t IketProfilingSessionDestroy(void *handle) {
    active = 0;
    return result("Destroy");
}
