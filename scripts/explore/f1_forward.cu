// f1_forward.cu: the floor of design F1 for the forward scan (docs/performance.md, "Design F1"): lanes are
// channels, all N states of a channel in one thread's registers, sequential in time; u, Δ and z staged as
// tiles of T steps through shared memory by asynchronous copies (double-buffered), B and C staged transposed
// so that a step reads them as warp-uniform broadcasts. zoh, fp32, real A, variable B and C (one group),
// softplus(Δ + bias), D and the gate z: the Mamba block of `make bench`. A prototype to measure the design's
// floor, not the library's kernel: it checks itself against a float64 scan on a small problem, then times the
// two bench sizes beside a float4 copy of the same bytes, medians of 20 launches after 3 of warm-up (CUDA events).
//
//   nvcc -O3 -arch=sm_90 -use_fast_math -o f1 scripts/explore/f1_forward.cu && ./f1
#include <cuda_pipeline.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

static void ck(cudaError_t err, int line) {
  if (err != cudaSuccess) {
    fprintf(stderr, "f1_forward.cu:%d: %s\n", line, cudaGetErrorString(err));
    exit(1);
  }
}
#define CK(x) ck((x), __LINE__)

constexpr int N = 16;   // states per channel
constexpr int T = 32;   // steps per tile
constexpr int CH = 64;  // channels per block (one thread each)
constexpr int RS = T + 4;  // row stride of a staged tile: 16-byte aligned rows

struct Tile {
  float u[CH][RS], d[CH][RS], z[CH][RS];
  float B[T][N], C[T][N];  // transposed: a step's N values are contiguous
};

struct Args {
  const float *u, *delta, *z, *A, *B, *C, *D, *bias;
  float *out;
  int batch, dim, seqlen;
};

// stage tile k of (b, c0 … c0+CH) into s: u, Δ, z rows by 16-byte copies, B and C transposed by 4-byte ones.
__device__ void stage(const Args &a, Tile &s, int b, int c0, int t0) {
  const int tid = threadIdx.x;
  for (int i = tid; i < CH * (T / 4); i += CH) {
    const int c = i / (T / 4), q = i % (T / 4);
    const size_t g = ((size_t)b * a.dim + c0 + c) * a.seqlen + t0 + 4 * q;
    __pipeline_memcpy_async(&s.u[c][4 * q], a.u + g, 16);
    __pipeline_memcpy_async(&s.d[c][4 * q], a.delta + g, 16);
    __pipeline_memcpy_async(&s.z[c][4 * q], a.z + g, 16);
  }
  for (int i = tid; i < N * T; i += CH) {
    const int n = i / T, t = i % T;
    const size_t g = ((size_t)b * N + n) * a.seqlen + t0 + t;
    __pipeline_memcpy_async(&s.B[t][n], a.B + g, 4);
    __pipeline_memcpy_async(&s.C[t][n], a.C + g, 4);
  }
  __pipeline_commit();
}

// Pre: a pass over the staged tile first puts softplus(Δ + bias) and the gate z·σ(z) in place of Δ and z (each
// thread its own row: 32 independent evaluations), so that the sequential loop's only dependence on the
// previous step is the states' (at about one warp a scheduler, a per-step chain of MUFU latencies ahead of the
// states' exponentials leaves the issue slots idle).
template <bool Pre>
__global__ void __launch_bounds__(CH) f1_forward(Args a) {
  extern __shared__ __align__(16) unsigned char smem[];
  Tile *buf = reinterpret_cast<Tile *>(smem);
  const int blocksPerRow = a.dim / CH;
  const int b = blockIdx.x / blocksPerRow, c0 = (blockIdx.x % blocksPerRow) * CH, c = threadIdx.x;
  const int d = c0 + c;
  float A2[N], h[N];
#pragma unroll
  for (int n = 0; n < N; n++) {
    A2[n] = a.A[d * N + n] * 1.4426950408889634f;  // exp(Δ·A) = 2^(Δ·A·log2 e): one MUFU.EX2
    h[n] = 0.f;
  }
  const float Dv = a.D[d], bias = a.bias[d];
  const int tiles = a.seqlen / T;
  stage(a, buf[0], b, c0, 0);
  for (int k = 0; k < tiles; k++) {
    if (k + 1 < tiles) {
      stage(a, buf[(k + 1) & 1], b, c0, (k + 1) * T);
      __pipeline_wait_prior(1);
    } else {
      __pipeline_wait_prior(0);
    }
    __syncthreads();
    Tile &s = buf[k & 1];
    if (Pre) {
#pragma unroll 8
      for (int t = 0; t < T; t++) {
        const float v = s.d[c][t] + bias, z = s.z[c][t];
        s.d[c][t] = v <= 20.f ? __logf(1.f + __expf(v)) : v;
        s.z[c][t] = z / (1.f + __expf(-z));
      }
    }
#pragma unroll 2
    for (int t = 0; t < T; t++) {
      float dt = s.d[c][t];
      if (!Pre) {
        dt += bias;
        dt = dt <= 20.f ? __logf(1.f + __expf(dt)) : dt;
      }
      const float u = s.u[c][t], du = dt * u;
      const float4 *Bt = reinterpret_cast<const float4 *>(s.B[t]);
      const float4 *Ct = reinterpret_cast<const float4 *>(s.C[t]);
      float y = 0.f;
#pragma unroll
      for (int q = 0; q < N / 4; q++) {
        const float4 bq = Bt[q], cq = Ct[q];
        const float bb[4] = {bq.x, bq.y, bq.z, bq.w}, cc[4] = {cq.x, cq.y, cq.z, cq.w};
#pragma unroll
        for (int j = 0; j < 4; j++) {
          const int n = 4 * q + j;
          h[n] = fmaf(exp2f(dt * A2[n]), h[n], du * bb[j]);
          y = fmaf(h[n], cc[j], y);
        }
      }
      y = fmaf(Dv, u, y);
      const float z = s.z[c][t];
      s.u[c][t] = Pre ? y * z : y * z / (1.f + __expf(-z));  // u is spent: its slot takes the output
    }
    __syncthreads();
    for (int i = threadIdx.x; i < CH * (T / 4); i += CH) {
      const int cc = i / (T / 4), q = i % (T / 4);
      const size_t g = ((size_t)b * a.dim + c0 + cc) * a.seqlen + k * T + 4 * q;
      *reinterpret_cast<float4 *>(a.out + g) = *reinterpret_cast<const float4 *>(&s.u[cc][4 * q]);
    }
    __syncthreads();
  }
}

__global__ void copy4(const float4 *in, float4 *out, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) out[i] = in[i];
}

struct Problem {
  int batch, dim, seqlen;
  std::vector<float> u, delta, z, A, B, C, D, bias;
};

static float frand(unsigned long long &s) {  // uniform in [0, 1)
  s = s * 6364136223846793005ULL + 1442695040888963407ULL;
  return (s >> 40) * (1.0f / 16777216.0f);
}

static Problem generate(int batch, int dim, int seqlen, unsigned long long seed) {
  Problem p{batch, dim, seqlen};
  const size_t n = (size_t)batch * dim * seqlen, nb = (size_t)batch * N * seqlen;
  p.u.resize(n), p.delta.resize(n), p.z.resize(n), p.B.resize(nb), p.C.resize(nb);
  p.A.resize((size_t)dim * N), p.D.resize(dim), p.bias.resize(dim);
  for (auto &x : p.u) x = 2 * frand(seed) - 1;
  for (auto &x : p.delta) x = 4 * frand(seed) - 5;  // softplus(Δ + bias) about 0.003 … 0.1
  for (auto &x : p.z) x = 4 * frand(seed) - 2;
  for (auto &x : p.B) x = 2 * frand(seed) - 1;
  for (auto &x : p.C) x = 2 * frand(seed) - 1;
  for (int d = 0; d < dim; d++)
    for (int k = 0; k < N; k++) p.A[(size_t)d * N + k] = -(k + 1.f);  // S4D-real
  for (auto &x : p.D) x = frand(seed);
  for (auto &x : p.bias) x = frand(seed) - 0.5f;
  return p;
}

struct Device {
  float *u, *delta, *z, *A, *B, *C, *D, *bias, *out;
  Args args(const Problem &p) { return Args{u, delta, z, A, B, C, D, bias, out, p.batch, p.dim, p.seqlen}; }
};

static float *upload(const std::vector<float> &v) {
  float *d;
  CK(cudaMalloc(&d, v.size() * sizeof(float)));
  CK(cudaMemcpy(d, v.data(), v.size() * sizeof(float), cudaMemcpyHostToDevice));
  return d;
}

static Device place(const Problem &p) {
  Device d{upload(p.u), upload(p.delta), upload(p.z), upload(p.A), upload(p.B), upload(p.C), upload(p.D), upload(p.bias)};
  CK(cudaMalloc(&d.out, p.u.size() * sizeof(float)));
  return d;
}

static void release(Device &d) {
  for (float *x : {d.u, d.delta, d.z, d.A, d.B, d.C, d.D, d.bias, d.out}) CK(cudaFree(x));
}

template <bool Pre>
static void launch(const Args &a) {
  const int blocks = a.batch * (a.dim / CH);
  f1_forward<Pre><<<blocks, CH, 2 * sizeof(Tile)>>>(a);
}

static double median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

template <class F>
static double timeMedian(F f) {
  cudaEvent_t s, e;
  CK(cudaEventCreate(&s));
  CK(cudaEventCreate(&e));
  for (int i = 0; i < 3; i++) f();
  std::vector<float> ms;
  for (int i = 0; i < 20; i++) {
    CK(cudaEventRecord(s));
    f();
    CK(cudaEventRecord(e));
    CK(cudaEventSynchronize(e));
    float x;
    CK(cudaEventElapsedTime(&x, s, e));
    ms.push_back(x);
  }
  CK(cudaGetLastError());
  return 1e3 * median(ms);
}

// check compares the kernel with a float64 scan: the largest |kernel − reference| over the largest |reference|
// of each row's outputs (normwise by row).
template <bool Pre>
static double check(int batch, int dim, int seqlen) {
  Problem p = generate(batch, dim, seqlen, 7);
  Device d = place(p);
  launch<Pre>(d.args(p));
  CK(cudaDeviceSynchronize());
  std::vector<float> got(p.u.size());
  CK(cudaMemcpy(got.data(), d.out, got.size() * sizeof(float), cudaMemcpyDeviceToHost));
  double worst = 0;
  for (int b = 0; b < batch; b++)
    for (int c = 0; c < dim; c++) {
      double h[N] = {0}, err = 0, mag = 0;
      for (int t = 0; t < seqlen; t++) {
        const size_t i = ((size_t)b * dim + c) * seqlen + t;
        double dt = (double)p.delta[i] + p.bias[c];
        dt = dt <= 20 ? std::log1p(std::exp(dt)) : dt;
        double y = 0;
        for (int n = 0; n < N; n++) {
          const size_t j = ((size_t)b * N + n) * seqlen + t;
          h[n] = std::exp(dt * p.A[(size_t)c * N + n]) * h[n] + dt * p.u[i] * p.B[j];
          y += h[n] * p.C[j];
        }
        y += p.D[c] * p.u[i];
        y *= p.z[i] / (1 + std::exp(-(double)p.z[i]));
        err = std::max(err, std::fabs(got[i] - y)), mag = std::max(mag, std::fabs(y));
      }
      worst = std::max(worst, err / mag);
    }
  release(d);
  return worst;
}

// sweep: time per update as the rows grow (batch 8 … 64 at dim 2048, seqlen 1024): whether the design is bound
// by its parallelism (about one warp a scheduler at the bench's large size) or by a unit's throughput.
static void sweep() {
  printf("%-18s %8s %12s %12s\n", "b×dim×seqlen×N", "warps/SM", "µs", "ps/update");
  for (int b : {8, 16, 32, 64}) {
    Problem p = generate(b, 2048, 1024, 13);
    Device d = place(p);
    const Args a = d.args(p);
    const double x = timeMedian([&] { launch<true>(a); });
    printf("%-18s %8.1f %12.1f %12.2f\n", (std::to_string(b) + "×2048×1024×16").c_str(), b * 2048 / 32.0 / 132, x, 1e6 * x / ((double)p.u.size() * N));
    release(d);
  }
}

int main(int argc, char **argv) {
  if (argc > 1 && std::string(argv[1]) == "sweep") {
    CK(cudaFuncSetAttribute(f1_forward<true>, cudaFuncAttributeMaxDynamicSharedMemorySize, 2 * sizeof(Tile)));
    sweep();
    return 0;
  }
  for (auto f : {f1_forward<false>, f1_forward<true>})
    CK(cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize, 2 * sizeof(Tile)));
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  cudaFuncAttributes f0, f1;
  CK(cudaFuncGetAttributes(&f0, f1_forward<false>));
  CK(cudaFuncGetAttributes(&f1, f1_forward<true>));
  printf("%s, %d SMs; registers %d (in the loop) and %d (pre-pass), stack %d and %d bytes, %zu bytes of shared memory a block\n", prop.name,
         prop.multiProcessorCount, f0.numRegs, f1.numRegs, (int)f0.localSizeBytes, (int)f1.localSizeBytes, 2 * sizeof(Tile));
  const double e0 = check<false>(2, 128, 512), e1 = check<true>(2, 128, 512);
  printf("check against a float64 scan (2×128×512×16): normwise max relative error %.3g (in the loop), %.3g (pre-pass)\n", e0, e1);
  printf("%-18s %10s %12s %10s %13s %14s\n", "b×dim×seqlen×N", "copy µs", "in-loop µs", "% of copy", "pre-pass µs", "% of copy");
  for (auto sz : {std::vector<int>{8, 512, 1024}, std::vector<int>{8, 2048, 4096}}) {
    Problem p = generate(sz[0], sz[1], sz[2], 11);
    Device d = place(p);
    const Args a = d.args(p);
    // the bytes F1 moves: u, Δ, z in, out back, B and C: a float4 copy of as many bytes, in to out
    const size_t n = p.u.size(), bytes = (4 * n + 2 * p.B.size()) * sizeof(float);
    float *src, *dst;
    CK(cudaMalloc(&src, bytes / 2));
    CK(cudaMalloc(&dst, bytes / 2));
    const size_t n4 = bytes / 2 / 16;
    auto cpf = [&] { copy4<<<4 * prop.multiProcessorCount, 512>>>((const float4 *)src, (float4 *)dst, n4); };
    // interleaved rounds: copy, in-loop, pre-pass, three times; the medians of all
    std::vector<float> cp, v0, v1;
    for (int r = 0; r < 3; r++) {
      cp.push_back(timeMedian(cpf));
      v0.push_back(timeMedian([&] { launch<false>(a); }));
      v1.push_back(timeMedian([&] { launch<true>(a); }));
    }
    CK(cudaFree(src));
    CK(cudaFree(dst));
    const double c = median(cp), x0 = median(v0), x1 = median(v1);
    printf("%-18s %10.1f %12.1f %9.1f%% %13.1f %13.1f%%\n",
           (std::to_string(sz[0]) + "×" + std::to_string(sz[1]) + "×" + std::to_string(sz[2]) + "×16").c_str(), c, x0, 100 * c / x0, x1, 100 * c / x1);
    release(d);
  }
  return e0 < 1e-4 && e1 < 1e-4 ? 0 : 1;
}
