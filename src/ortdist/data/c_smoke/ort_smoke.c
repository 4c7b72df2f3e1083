/* ortdist's C smoke program: proves a static libonnxruntime.a is complete on its own.
 *
 * Usage: ort_smoke MODEL.ort DIR
 *   Reads DIR/in_<i>.bin (raw float32, one per model input, shapes from the model), runs the
 *   model on the CPU, writes DIR/out_<i>.bin (raw float32) and DIR/outputs.txt
 *   ("<name> <element count>" per output). Exit 0 on success; on an ORT error, prints the
 *   error code and message and exits 2.
 * Only the C API is used, so the program is plain C linked against the C++ archive.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnxruntime/onnxruntime_c_api.h"

static const OrtApi *ort;

static void check(OrtStatus *status, const char *what) {
  if (status != NULL) {
    fprintf(stderr, "ort_smoke: %s failed: [code %d] %s\n", what, (int)ort->GetErrorCode(status),
            ort->GetErrorMessage(status));
    ort->ReleaseStatus(status);
    exit(2);
  }
}

static void *read_file(const char *path, size_t *size) {
  FILE *f = fopen(path, "rb");
  if (!f) { perror(path); exit(3); }
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  void *data = malloc((size_t)n > 0 ? (size_t)n : 1);
  if (n > 0 && fread(data, 1, (size_t)n, f) != (size_t)n) { perror(path); exit(3); }
  fclose(f);
  *size = (size_t)n;
  return data;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s MODEL.ort DIR\n", argv[0]);
    return 64;
  }
  ort = OrtGetApiBase()->GetApi(ORT_API_VERSION);
  if (!ort) { fprintf(stderr, "ort_smoke: ORT API version %d unavailable\n", ORT_API_VERSION); return 2; }
  printf("onnxruntime %s\n", OrtGetApiBase()->GetVersionString());

  OrtEnv *env; OrtSessionOptions *options; OrtSession *session; OrtAllocator *allocator;
  check(ort->CreateEnv(ORT_LOGGING_LEVEL_WARNING, "ort_smoke", &env), "CreateEnv");
  check(ort->CreateSessionOptions(&options), "CreateSessionOptions");
  check(ort->SetIntraOpNumThreads(options, 1), "SetIntraOpNumThreads");
  check(ort->CreateSession(env, argv[1], options, &session), "CreateSession");
  check(ort->GetAllocatorWithDefaultOptions(&allocator), "GetAllocatorWithDefaultOptions");
  OrtMemoryInfo *memory;
  check(ort->CreateCpuMemoryInfo(OrtArenaAllocator, OrtMemTypeDefault, &memory), "CreateCpuMemoryInfo");

  size_t n_in, n_out;
  check(ort->SessionGetInputCount(session, &n_in), "SessionGetInputCount");
  check(ort->SessionGetOutputCount(session, &n_out), "SessionGetOutputCount");
  char **in_names = calloc(n_in, sizeof(char *)), **out_names = calloc(n_out, sizeof(char *));
  OrtValue **inputs = calloc(n_in, sizeof(OrtValue *)), **outputs = calloc(n_out, sizeof(OrtValue *));
  void **buffers = calloc(n_in, sizeof(void *));
  char path[4096];

  for (size_t i = 0; i < n_in; i++) {
    check(ort->SessionGetInputName(session, i, allocator, &in_names[i]), "SessionGetInputName");
    OrtTypeInfo *type; const OrtTensorTypeAndShapeInfo *info;
    check(ort->SessionGetInputTypeInfo(session, i, &type), "SessionGetInputTypeInfo");
    check(ort->CastTypeInfoToTensorInfo(type, &info), "CastTypeInfoToTensorInfo");
    size_t rank; check(ort->GetDimensionsCount(info, &rank), "GetDimensionsCount");
    int64_t *dims = calloc(rank ? rank : 1, sizeof(int64_t));
    check(ort->GetDimensions(info, dims, rank), "GetDimensions");
    size_t count = 1;
    for (size_t d = 0; d < rank; d++) { if (dims[d] < 1) dims[d] = 1; count *= (size_t)dims[d]; }
    snprintf(path, sizeof path, "%s/in_%zu.bin", argv[2], i);
    size_t size; buffers[i] = read_file(path, &size);
    if (size != count * sizeof(float)) {
      fprintf(stderr, "ort_smoke: %s holds %zu bytes, input %s needs %zu floats\n", path, size, in_names[i], count);
      return 3;
    }
    check(ort->CreateTensorWithDataAsOrtValue(memory, buffers[i], size, dims, rank,
                                              ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, &inputs[i]),
          "CreateTensorWithDataAsOrtValue");
    free(dims);
    ort->ReleaseTypeInfo(type);
  }
  for (size_t i = 0; i < n_out; i++)
    check(ort->SessionGetOutputName(session, i, allocator, &out_names[i]), "SessionGetOutputName");

  check(ort->Run(session, NULL, (const char *const *)in_names, (const OrtValue *const *)inputs, n_in,
                 (const char *const *)out_names, n_out, outputs),
        "Run");

  snprintf(path, sizeof path, "%s/outputs.txt", argv[2]);
  FILE *listing = fopen(path, "w");
  for (size_t i = 0; i < n_out; i++) {
    OrtTensorTypeAndShapeInfo *info; size_t count; float *data;
    check(ort->GetTensorTypeAndShape(outputs[i], &info), "GetTensorTypeAndShape");
    check(ort->GetTensorShapeElementCount(info, &count), "GetTensorShapeElementCount");
    check(ort->GetTensorMutableData(outputs[i], (void **)&data), "GetTensorMutableData");
    snprintf(path, sizeof path, "%s/out_%zu.bin", argv[2], i);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, sizeof(float), count, f) != count) { perror(path); return 3; }
    fclose(f);
    fprintf(listing, "%s %zu\n", out_names[i], count);
    ort->ReleaseTensorTypeAndShapeInfo(info);
    ort->ReleaseValue(outputs[i]);
  }
  fclose(listing);
  for (size_t i = 0; i < n_in; i++) { ort->ReleaseValue(inputs[i]); free(buffers[i]); }
  ort->ReleaseMemoryInfo(memory);
  ort->ReleaseSession(session);
  ort->ReleaseSessionOptions(options);
  ort->ReleaseEnv(env);
  printf("ran %s: %zu input(s), %zu output(s)\n", argv[1], n_in, n_out);
  return 0;
}
