/* Native kernels of the reproducible engine (docs/PROTOCOL.md §1-§3).
 *
 * Built by agents/training/native.py with `-O3 -ffp-contract=off` and never -ffast-math: every
 * float operation below is one IEEE-754 binary32 + - * / with round-to-nearest-even and no
 * fused multiply-add, so the results are bit-identical to the portable torch path (ops.py) and
 * to the scalar reference (reference.py) on any machine. SIMD width, tiling and thread count
 * only decide *which* output elements are computed together, never the order of the operations
 * that produce one element.
 */
#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------------------------ */
/* keccak-f[1600] and keccak-256 (Ethereum's: pad byte 0x01, not SHA3's 0x06)                  */

static const uint64_t RC[24] = {
    0x0000000000000001ULL, 0x0000000000008082ULL, 0x800000000000808aULL, 0x8000000080008000ULL,
    0x000000000000808bULL, 0x0000000080000001ULL, 0x8000000080008081ULL, 0x8000000000008009ULL,
    0x000000000000008aULL, 0x0000000000000088ULL, 0x0000000080008009ULL, 0x000000008000000aULL,
    0x000000008000808bULL, 0x800000000000008bULL, 0x8000000000008089ULL, 0x8000000000008003ULL,
    0x8000000000008002ULL, 0x8000000000000080ULL, 0x000000000000800aULL, 0x800000008000000aULL,
    0x8000000080008081ULL, 0x8000000000008080ULL, 0x0000000080000001ULL, 0x8000000080008008ULL};

#define ROL(x, s) (((x) << (s)) | ((x) >> (64 - (s))))

/* One round on 25 named lanes; the classic "lanes in registers" formulation. */
#define ROUND(T, i)                                                                                \
    do {                                                                                         \
        T C0 = a00 ^ a05 ^ a10 ^ a15 ^ a20, C1 = a01 ^ a06 ^ a11 ^ a16 ^ a21;             \
        T C2 = a02 ^ a07 ^ a12 ^ a17 ^ a22, C3 = a03 ^ a08 ^ a13 ^ a18 ^ a23;             \
        T C4 = a04 ^ a09 ^ a14 ^ a19 ^ a24;                                               \
        T D0 = C4 ^ ROL(C1, 1), D1 = C0 ^ ROL(C2, 1), D2 = C1 ^ ROL(C3, 1);               \
        T D3 = C2 ^ ROL(C4, 1), D4 = C3 ^ ROL(C0, 1);                                     \
        T b00 = a00 ^ D0;                                                                 \
        T b10 = ROL(a01 ^ D1, 1);                                                         \
        T b20 = ROL(a02 ^ D2, 62);                                                        \
        T b05 = ROL(a03 ^ D3, 28);                                                        \
        T b15 = ROL(a04 ^ D4, 27);                                                        \
        T b16 = ROL(a05 ^ D0, 36);                                                        \
        T b01 = ROL(a06 ^ D1, 44);                                                        \
        T b11 = ROL(a07 ^ D2, 6);                                                         \
        T b21 = ROL(a08 ^ D3, 55);                                                        \
        T b06 = ROL(a09 ^ D4, 20);                                                        \
        T b07 = ROL(a10 ^ D0, 3);                                                         \
        T b17 = ROL(a11 ^ D1, 10);                                                        \
        T b02 = ROL(a12 ^ D2, 43);                                                        \
        T b12 = ROL(a13 ^ D3, 25);                                                        \
        T b22 = ROL(a14 ^ D4, 39);                                                        \
        T b23 = ROL(a15 ^ D0, 41);                                                        \
        T b08 = ROL(a16 ^ D1, 45);                                                        \
        T b18 = ROL(a17 ^ D2, 15);                                                        \
        T b03 = ROL(a18 ^ D3, 21);                                                        \
        T b13 = ROL(a19 ^ D4, 8);                                                         \
        T b14 = ROL(a20 ^ D0, 18);                                                        \
        T b24 = ROL(a21 ^ D1, 2);                                                         \
        T b09 = ROL(a22 ^ D2, 61);                                                        \
        T b19 = ROL(a23 ^ D3, 56);                                                        \
        T b04 = ROL(a24 ^ D4, 14);                                                        \
        a00 = b00 ^ (~b01 & b02) ^ RC[i];                                                        \
        a01 = b01 ^ (~b02 & b03);                                                                \
        a02 = b02 ^ (~b03 & b04);                                                                \
        a03 = b03 ^ (~b04 & b00);                                                                \
        a04 = b04 ^ (~b00 & b01);                                                                \
        a05 = b05 ^ (~b06 & b07);                                                                \
        a06 = b06 ^ (~b07 & b08);                                                                \
        a07 = b07 ^ (~b08 & b09);                                                                \
        a08 = b08 ^ (~b09 & b05);                                                                \
        a09 = b09 ^ (~b05 & b06);                                                                \
        a10 = b10 ^ (~b11 & b12);                                                                \
        a11 = b11 ^ (~b12 & b13);                                                                \
        a12 = b12 ^ (~b13 & b14);                                                                \
        a13 = b13 ^ (~b14 & b10);                                                                \
        a14 = b14 ^ (~b10 & b11);                                                                \
        a15 = b15 ^ (~b16 & b17);                                                                \
        a16 = b16 ^ (~b17 & b18);                                                                \
        a17 = b17 ^ (~b18 & b19);                                                                \
        a18 = b18 ^ (~b19 & b15);                                                                \
        a19 = b19 ^ (~b15 & b16);                                                                \
        a20 = b20 ^ (~b21 & b22);                                                                \
        a21 = b21 ^ (~b22 & b23);                                                                \
        a22 = b22 ^ (~b23 & b24);                                                                \
        a23 = b23 ^ (~b24 & b20);                                                                \
        a24 = b24 ^ (~b20 & b21);                                                                \
    } while (0)

static void keccakf(uint64_t *s) {
    uint64_t a00 = s[0], a01 = s[1], a02 = s[2], a03 = s[3], a04 = s[4];
    uint64_t a05 = s[5], a06 = s[6], a07 = s[7], a08 = s[8], a09 = s[9];
    uint64_t a10 = s[10], a11 = s[11], a12 = s[12], a13 = s[13], a14 = s[14];
    uint64_t a15 = s[15], a16 = s[16], a17 = s[17], a18 = s[18], a19 = s[19];
    uint64_t a20 = s[20], a21 = s[21], a22 = s[22], a23 = s[23], a24 = s[24];
    for (int i = 0; i < 24; i += 2) {
        ROUND(uint64_t, i);
        ROUND(uint64_t, i + 1);
    }
    s[0] = a00, s[1] = a01, s[2] = a02, s[3] = a03, s[4] = a04;
    s[5] = a05, s[6] = a06, s[7] = a07, s[8] = a08, s[9] = a09;
    s[10] = a10, s[11] = a11, s[12] = a12, s[13] = a13, s[14] = a14;
    s[15] = a15, s[16] = a16, s[17] = a17, s[18] = a18, s[19] = a19;
    s[20] = a20, s[21] = a21, s[22] = a22, s[23] = a23, s[24] = a24;
}

/* The same permutation on NW independent states at once, one state per SIMD lane: Merkle
 * leaves and nodes are independent, so a tree hashes NW messages per permutation. */
#if defined(__AVX512F__)
#define NW 8
#elif defined(__AVX2__)
#define NW 4
#else
#define NW 2
#endif
typedef uint64_t vu __attribute__((vector_size(NW * 8)));

static void keccakf_v(vu *s) {
    vu a00 = s[0], a01 = s[1], a02 = s[2], a03 = s[3], a04 = s[4];
    vu a05 = s[5], a06 = s[6], a07 = s[7], a08 = s[8], a09 = s[9];
    vu a10 = s[10], a11 = s[11], a12 = s[12], a13 = s[13], a14 = s[14];
    vu a15 = s[15], a16 = s[16], a17 = s[17], a18 = s[18], a19 = s[19];
    vu a20 = s[20], a21 = s[21], a22 = s[22], a23 = s[23], a24 = s[24];
    for (int i = 0; i < 24; i += 2) {
        ROUND(vu, i);
        ROUND(vu, i + 1);
    }
    s[0] = a00, s[1] = a01, s[2] = a02, s[3] = a03, s[4] = a04;
    s[5] = a05, s[6] = a06, s[7] = a07, s[8] = a08, s[9] = a09;
    s[10] = a10, s[11] = a11, s[12] = a12, s[13] = a13, s[14] = a14;
    s[15] = a15, s[16] = a16, s[17] = a17, s[18] = a18, s[19] = a19;
    s[20] = a20, s[21] = a21, s[22] = a22, s[23] = a23, s[24] = a24;
}

#define RATE 136 /* keccak-256: 1088-bit rate = 17 lanes */

static inline uint64_t load64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8); /* the lanes are little-endian; x86-64 and aarch64 are too */
    return v;
}

/* keccak-256 of one message of any length (the streaming baseline and the generic hasher). */
void vtp_keccak256(const uint8_t *in, size_t len, uint8_t *out) {
    uint64_t s[25] = {0};
    while (len >= RATE) {
        for (int i = 0; i < 17; i++) s[i] ^= load64(in + 8 * i);
        keccakf(s);
        in += RATE;
        len -= RATE;
    }
    uint8_t last[RATE] = {0};
    memcpy(last, in, len);
    last[len] ^= 0x01;
    last[RATE - 1] ^= 0x80;
    for (int i = 0; i < 17; i++) s[i] ^= load64(last + 8 * i);
    keccakf(s);
    memcpy(out, s, 32);
}

/* keccak-256 of n messages of `len` bytes each, stored back to back. */
void vtp_keccak256_batch(const uint8_t *in, size_t n, size_t len, uint8_t *out) {
    for (size_t i = 0; i < n; i++) vtp_keccak256(in + i * len, len, out + 32 * i);
}

static inline uint32_t bswap32(uint32_t x) { return __builtin_bswap32(x); }

/* Squeezes the 32-byte digests of the NW states. */
static inline void squeeze_v(const vu *s, int count, uint8_t *out) {
    for (int l = 0; l < count; l++)
        for (int q = 0; q < 4; q++) memcpy(out + 32 * l + 8 * q, (const uint64_t *)&s[q] + l, 8);
}

/* NW tensor leaves at once (leaf indices first .. first+NW-1; those >= L are skipped). A leaf is
 * 64 elements (256 bytes) as big-endian words, float NaNs canonicalised to 0x7FC00000
 * (PROTOCOL §3), the last one zero padded. Two permutations per leaf. */
static void hash_leaves_v(const uint32_t *v, size_t n, int is_f32, size_t first, uint8_t *out) {
    size_t L = (n + 63) / 64;
    uint64_t lanes[32][NW] __attribute__((aligned(64)));
    int count = 0;
    for (int l = 0; l < NW; l++) {
        size_t li = first + l;
        uint32_t w[64];
        if (li < L) {
            size_t c = n - 64 * li < 64 ? n - 64 * li : 64;
            const uint32_t *src = v + 64 * li;
            for (size_t i = 0; i < 64; i++) {
                uint32_t x = i < c ? src[i] : 0;
                if (is_f32 && (x & 0x7FFFFFFFu) > 0x7F800000u) x = 0x7FC00000u;
                w[i] = bswap32(x);
            }
            count = l + 1;
        } else {
            memset(w, 0, sizeof(w));
        }
        for (int i = 0; i < 32; i++) lanes[i][l] = load64((const uint8_t *)w + 8 * i);
    }
    vu s[25];
    memset(s, 0, sizeof(s));
    for (int i = 0; i < 17; i++) memcpy(&s[i], lanes[i], sizeof(vu));
    keccakf_v(s);
    for (int i = 0; i < 15; i++) {
        vu x;
        memcpy(&x, lanes[17 + i], sizeof(vu));
        s[i] ^= x;
    }
    s[15] ^= 0x01;                   /* pad byte at offset 120 of the second block */
    s[16] ^= 0x8000000000000000ULL; /* final bit at offset 135 */
    keccakf_v(s);
    squeeze_v(s, count, out);
}

/* keccak256(left || right) for `count` (<= NW) consecutive node pairs in `in`. */
static void hash_nodes_v(const uint8_t *in, int count, uint8_t *out) {
    uint64_t lanes[8][NW] __attribute__((aligned(64)));
    memset(lanes, 0, sizeof(lanes));
    for (int l = 0; l < count; l++)
        for (int i = 0; i < 8; i++) lanes[i][l] = load64(in + 64 * l + 8 * i);
    vu s[25];
    memset(s, 0, sizeof(s));
    for (int i = 0; i < 8; i++) memcpy(&s[i], lanes[i], sizeof(vu));
    s[8] ^= 0x01;
    s[16] ^= 0x8000000000000000ULL;
    keccakf_v(s);
    squeeze_v(s, count, out);
}

/* Leaf hashes of a tensor of n 32-bit elements: ceil(n/64) hashes into out. */
void vtp_tensor_leaves(const uint32_t *v, size_t n, int is_f32, uint8_t *out) {
    size_t L = (n + 63) / 64;
    for (size_t i = 0; i < L; i += NW) hash_leaves_v(v, n, is_f32, i, out + 32 * i);
}

/* Given `width` (a power of two) nodes in buf, writes every upper level after them:
 * level sizes width/2, width/4, ..., 1. buf must hold 2*width-1 nodes. */
void vtp_merkle_levels(uint8_t *buf, size_t width) {
    uint8_t *cur = buf;
    while (width > 1) {
        uint8_t *nxt = cur + 32 * width;
        size_t pairs = width / 2;
        for (size_t i = 0; i < pairs; i += NW) {
            int c = pairs - i < NW ? (int)(pairs - i) : NW;
            hash_nodes_v(cur + 64 * i, c, nxt + 32 * i);
        }
        cur = nxt;
        width /= 2;
    }
}

/* Data root of a tensor without keeping the tree: leaves are hashed in groups of 64 and folded
 * to a subtree root at once, so the working set stays in L1/L2. */
void vtp_tensor_data_root(const uint32_t *v, size_t n, int is_f32, uint8_t *out) {
    size_t L = (n + 63) / 64;
    size_t width = 1;
    while (width < L) width *= 2;
    /* the padded tree has `width` leaves; pad leaves are bytes32(0) */
    size_t G = width < 64 ? width : 64; /* group size: a power of two dividing width */
    size_t ngroups = width / G;
    uint8_t *roots = malloc(32 * (2 * ngroups));
    uint8_t grp[32 * 127 + 32 * NW];
    for (size_t g = 0; g < ngroups; g++) {
        size_t l0 = g * G;
        memset(grp, 0, 32 * G);
        if (l0 < L)
            for (size_t i = 0; i < G && l0 + i < L; i += NW)
                hash_leaves_v(v, n, is_f32, l0 + i, grp + 32 * i);
        vtp_merkle_levels(grp, G);
        memcpy(roots + 32 * g, grp + 32 * (2 * G - 2), 32);
    }
    vtp_merkle_levels(roots, ngroups);
    memcpy(out, roots + 32 * (2 * ngroups - 2), 32);
    free(roots);
}

/* ------------------------------------------------------------------------------------------ */
/* matmul_nt: C[i,j] = dot(A[i,:], B[j,:]), acc = +0; acc = fl(acc + fl(a*b)) for k = 0..K-1.    */
/* Packed panels (like BLIS) so a register tile of MR x NR outputs advances through k together;  */
/* every output keeps its own strictly sequential k order.                                       */

#if defined(__AVX512F__)
#define VW 16
#define MR 8
#define NV 2
#else
#define VW 8
#define MR 6
#define NV 2
#endif
#define NR (VW * NV)
typedef float vf __attribute__((vector_size(VW * 4)));

/* aligned_alloc wants a size that is a multiple of the alignment */
static float *falloc(size_t n) {
    size_t bytes = (n * sizeof(float) + 63) / 64 * 64;
    float *p = aligned_alloc(64, bytes ? bytes : 64);
    if (!p) abort();
    return p;
}

typedef struct {
    const float *A;
    long sam, sak;
    const float *B;
    long sbn, sbk;
    float *C;
    long M, N, K;
    const float *Ap; /* packed A: ceil(M/MR) panels of K x MR */
    long p0, p1;     /* range of NR-column panels for this worker */
} mm_job;

/* Packs `n` (<= W) rows of a strided (rows, K) operand into a K x W panel, P[k*W + r], zero
 * padding rows n..W-1. The loop order follows memory: walking a strided source the wrong way
 * round (every access 4 KiB apart) thrashes one L1 set and costs several times the multiply. */
static void pack_panel(const float *src, long srow, long sk, long n, long K, long W, float *P) {
    if (n < W)
        for (long k = 0; k < K; k++)
            for (long r = n; r < W; r++) P[k * W + r] = 0.0f;
    if (sk == 1) {
        for (long r = 0; r < n; r++) {
            const float *row = src + r * srow;
            for (long k = 0; k < K; k++) P[k * W + r] = row[k];
        }
    } else if (srow == 1) {
        for (long k = 0; k < K; k++) {
            const float *col = src + k * sk;
            for (long r = 0; r < n; r++) P[k * W + r] = col[r];
        }
    } else {
        for (long k = 0; k < K; k++)
            for (long r = 0; r < n; r++) P[k * W + r] = src[r * srow + k * sk];
    }
}

static void mm_panels(const mm_job *J) {
    long K = J->K, M = J->M, N = J->N;
    long mpanels = (M + MR - 1) / MR;
    float *Bp = falloc((size_t)(K * NR + NR));
    for (long jp = J->p0; jp < J->p1; jp++) {
        long j0 = jp * NR;
        long nj = N - j0 < NR ? N - j0 : NR;
        pack_panel(J->B + j0 * J->sbn, J->sbn, J->sbk, nj, K, NR, Bp);
        for (long ip = 0; ip < mpanels; ip++) {
            const float *ap = J->Ap + ip * K * MR;
            vf acc[MR][NV];
            for (int r = 0; r < MR; r++)
                for (int v = 0; v < NV; v++) acc[r][v] = (vf){0}; /* +0.0 */
            for (long k = 0; k < K; k++) {
                vf b[NV];
                memcpy(b, Bp + k * NR, sizeof(b));
                for (int r = 0; r < MR; r++) {
                    float a = ap[k * MR + r];
                    for (int v = 0; v < NV; v++) {
                        vf prod = b[v] * a;  /* fl(a*b) ... */
                        acc[r][v] = acc[r][v] + prod; /* ... then fl(acc + prod): no FMA */
                    }
                }
            }
            long i0 = ip * MR;
            long ni = M - i0 < MR ? M - i0 : MR;
            for (long r = 0; r < ni; r++) {
                float tmp[NR];
                memcpy(tmp, acc[r], sizeof(tmp));
                memcpy(J->C + (i0 + r) * N + j0, tmp, sizeof(float) * (size_t)nj);
            }
        }
    }
    free(Bp);
}

static void *mm_worker(void *arg) {
    mm_panels((const mm_job *)arg);
    return NULL;
}

/* A: (M,K) with strides (sam, sak); B: (N,K) with strides (sbn, sbk); C: (M,N) contiguous. */
void vtp_matmul_nt(const float *A, long sam, long sak, const float *B, long sbn, long sbk,
                   float *C, long M, long N, long K, int nthreads) {
    if (K == 0) {
        for (long i = 0; i < M * N; i++) C[i] = 0.0f;
        return;
    }
    long mpanels = (M + MR - 1) / MR;
    float *Ap = falloc((size_t)(mpanels * K * MR + MR));
    for (long ip = 0; ip < mpanels; ip++) {
        long ni = M - ip * MR < MR ? M - ip * MR : MR;
        pack_panel(A + ip * MR * sam, sam, sak, ni, K, MR, Ap + ip * K * MR);
    }
    long npanels = (N + NR - 1) / NR;
    /* Threads only split the output columns; below ~1M multiply-adds they cost more than
     * they save. Neither choice changes any bit. */
    if (nthreads > npanels) nthreads = (int)npanels;
    if ((double)M * N * K < 1e6 || nthreads < 1) nthreads = 1;
    mm_job jobs[64];
    pthread_t th[64];
    if (nthreads > 64) nthreads = 64;
    for (int t = 0; t < nthreads; t++) {
        mm_job j = {A, sam, sak, B, sbn, sbk, C, M, N, K, Ap,
                    npanels * t / nthreads, npanels * (t + 1) / nthreads};
        jobs[t] = j;
    }
    int started = 0;
    for (int t = 1; t < nthreads; t++)
        if (pthread_create(&th[t], NULL, mm_worker, &jobs[t]) == 0) started = t;
        else break;
    /* a failed pthread_create falls back to doing that share on this thread */
    for (int t = started + 1; t < nthreads; t++) mm_panels(&jobs[t]);
    mm_panels(&jobs[0]);
    for (int t = 1; t <= started; t++) pthread_join(th[t], NULL);
    free(Ap);
}

/* `batch` independent products C[b] = A[b] B[b]^T (batch strides sab, sbb; C contiguous): the
 * version-3 batched matmul (attention) without a Python call per batch element. */
void vtp_matmul_nt_batch(const float *A, long batch, long sab, long sam, long sak, const float *B,
                         long sbb, long sbn, long sbk, float *C, long M, long N, long K,
                         int nthreads) {
    for (long b = 0; b < batch; b++)
        vtp_matmul_nt(A + b * sab, sam, sak, B + b * sbb, sbn, sbk, C + b * M * N, M, N, K,
                      nthreads);
}

/* ------------------------------------------------------------------------------------------ */
/* Row reductions (PROTOCOL §2): left to right from +0 (sum) or from the first element (max). */

/* RI rows are walked together, each strictly left to right with its own accumulator: the
 * additions of one row stay a sequential chain, and the RI independent chains fill the
 * pipeline that one chain's latency leaves idle. */
#define RI 8

void vtp_row_sum(const float *A, long sr, long sc, float *out, long M, long N) {
    if (sr == 1 && sc != 1) {
        /* transposed view: walk memory in order, one running sum per row, same j order */
        for (long i = 0; i < M; i++) out[i] = 0.0f;
        for (long j = 0; j < N; j++)
            for (long i = 0; i < M; i++) out[i] = out[i] + A[i + j * sc];
        return;
    }
    long i = 0;
    for (; i + RI <= M; i += RI) {
        float acc[RI];
        for (int r = 0; r < RI; r++) acc[r] = 0.0f;
        for (long j = 0; j < N; j++)
            for (int r = 0; r < RI; r++) acc[r] = acc[r] + A[(i + r) * sr + j * sc];
        for (int r = 0; r < RI; r++) out[i + r] = acc[r];
    }
    for (; i < M; i++) {
        float acc = 0.0f;
        for (long j = 0; j < N; j++) acc = acc + A[i * sr + j * sc];
        out[i] = acc;
    }
}

void vtp_row_max(const float *A, long sr, long sc, float *out, long M, long N) {
    long i = 0;
    for (; i + RI <= M; i += RI) {
        float m[RI];
        int nan[RI];
        for (int r = 0; r < RI; r++) {
            m[r] = A[(i + r) * sr];
            nan[r] = m[r] != m[r];
        }
        for (long j = 1; j < N; j++)
            for (int r = 0; r < RI; r++) {
                float x = A[(i + r) * sr + j * sc];
                nan[r] |= x != x;
                m[r] = x > m[r] ? x : m[r];
            }
        for (int r = 0; r < RI; r++) out[i + r] = nan[r] ? NAN : m[r];
    }
    for (; i < M; i++) {
        float m = A[i * sr];
        int nan = isnan(m);
        for (long j = 1; j < N; j++) {
            float x = A[i * sr + j * sc];
            if (isnan(x)) nan = 1;
            if (x > m) m = x;
        }
        out[i] = nan ? NAN : m;
    }
}

/* sum_last / max_last on i32 (PROTOCOL §2.6): two's-complement sums modulo 2^32 from 0, and
 * signed maxima from the first element. */
void vtp_row_sum_i32(const uint32_t *A, long sr, long sc, uint32_t *out, long M, long N) {
    for (long i = 0; i < M; i++) {
        uint32_t acc = 0;
        for (long j = 0; j < N; j++) acc += A[i * sr + j * sc];
        out[i] = acc;
    }
}

void vtp_row_max_i32(const int32_t *A, long sr, long sc, int32_t *out, long M, long N) {
    for (long i = 0; i < M; i++) {
        int32_t m = A[i * sr];
        for (long j = 1; j < N; j++) {
            int32_t x = A[i * sr + j * sc];
            m = x > m ? x : m;
        }
        out[i] = m;
    }
}

/* ------------------------------------------------------------------------------------------ */
/* exp32 / log32 exactly as PROTOCOL §2.1 / §2.2.                                               */

static inline float f_of(uint32_t b) {
    float f;
    memcpy(&f, &b, 4);
    return f;
}
static inline uint32_t bits_of(float f) {
    uint32_t b;
    memcpy(&b, &f, 4);
    return b;
}
static inline float pow2i(int n) { return f_of((uint32_t)(n + 127) << 23); }

static float exp32(float x) {
    if (isnan(x)) return x;
    if (x > 89.0f) return INFINITY;
    if (x < -104.0f) return 0.0f;
    const float INV_LN2 = f_of(0x3FB8AA3B), LN2_HI = f_of(0x3F317200), LN2_LO = f_of(0x35BFBE8E);
    float t = x * INV_LN2;
    float n = rintf(t);
    float r = (x - n * LN2_HI) - n * LN2_LO;
    float p = f_of(0x39500D01);
    p = p * r + f_of(0x3AB60B61);
    p = p * r + f_of(0x3C088889);
    p = p * r + f_of(0x3D2AAAAB);
    p = p * r + f_of(0x3E2AAAAB);
    p = p * r + f_of(0x3F000000);
    p = p * r + f_of(0x3F800000);
    p = p * r + f_of(0x3F800000);
    int ni = (int)n;
    if (ni > 127) return (p * pow2i(127)) * pow2i(ni - 127);
    if (ni < -126) return (p * pow2i(ni + 126)) * pow2i(-126);
    return p * pow2i(ni);
}

static float log32(float x) {
    if (isnan(x) || x < 0.0f) return NAN;
    if (x == 0.0f) return -INFINITY;
    if (isinf(x)) return INFINITY;
    int e = 0;
    if (x < f_of(0x00800000)) {
        x = x * pow2i(23);
        e = -23;
    }
    uint32_t b = bits_of(x);
    e += (int)((b >> 23) & 0xFF) - 127;
    float m = f_of((b & 0x007FFFFFu) | 0x3F800000u);
    if (m > f_of(0x3FB504F3)) {
        m = m * 0.5f;
        e += 1;
    }
    float f = m - 1.0f;
    float s = f / (2.0f + f);
    float z = s * s;
    const float L1 = f_of(0x3F2AAAAB), L2 = f_of(0x3ECCCCCD), L3 = f_of(0x3E924925),
                L4 = f_of(0x3E638E39);
    float R = z * (L1 + z * (L2 + z * (L3 + z * L4)));
    float lm = s * (2.0f + R);
    float E = (float)e;
    return E * f_of(0x3F317200) + (lm + E * f_of(0x35BFBE8E));
}

/* tanh32 / erf32 exactly as PROTOCOL §2.6 (agents/training/registry.py t_tanh / t_erf). */
static float tanh32(float x) {
    if (isnan(x)) return x;
    float a = fabsf(x);
    float r;
    if (a > f_of(0x41100000)) { /* |x| > 9 */
        r = 1.0f;
    } else {
        float e = exp32(a + a);
        r = 1.0f - 2.0f / (e + 1.0f);
    }
    return signbit(x) ? -r : r;
}

static float erf32(float x) {
    if (isnan(x)) return x;
    float a = fabsf(x);
    float r;
    if (a >= 4.0f) {
        r = 1.0f;
    } else {
        float t = 1.0f / (1.0f + f_of(0x3EA7BA05) * a);
        float p = f_of(0x3F87DC22);
        p = p * t + f_of(0xBFBA00E3);
        p = p * t + f_of(0x3FB5F0E3);
        p = p * t + f_of(0xBE91A98E);
        p = p * t + f_of(0x3E827906);
        p = p * t;
        r = 1.0f - p * exp32(-(a * a));
    }
    return signbit(x) ? -r : r;
}


/* ------------------------------------------------------------------------------------------ */
/* The same four functions on SIMD vectors, lane by lane: every lane does exactly the scalar   */
/* function's operations above (both sides of each branch are computed and the lane selects    */
/* the one the scalar code would take), so the bits are the scalar bits. rintf(t) is           */
/* (t + 1.5*2^23) - 1.5*2^23, exact for |t| < 2^22 under round-to-nearest-even; where it       */
/* differs from rintf (t = -0 or -0.5 < t < 0 gives +0 for -0) the result is the same, since n */
/* only enters as n*LN2 subtracted from x and as the integer exponent.                         */

#define EW 16 /* lanes of the generic vector type (lowered to the target's registers) */
typedef float V __attribute__((vector_size(EW * 4)));
typedef int32_t VI __attribute__((vector_size(EW * 4)));
typedef uint32_t VU __attribute__((vector_size(EW * 4)));

static inline V vsplat(float f) { return (V){0} + f; }
static inline VI visplat(int32_t i) { return (VI){0} + i; }
static inline V vbits(uint32_t b) { return vsplat(f_of(b)); }
/* lane-wise m ? a : b for a comparison mask m (all ones or zero) */
static inline V vsel(VI m, V a, V b) { return (V)(((VI)a & m) | ((VI)b & ~m)); }
static inline VI visel(VI m, VI a, VI b) { return (a & m) | (b & ~m); }
static inline V vpow2(VI n) { return (V)((n + 127) << 23); } /* n in [-126, 127] */
static inline VI vclamp(VI n, int lo, int hi) {
    n = visel(n < lo, visplat(lo), n);
    return visel(n > hi, visplat(hi), n);
}

static inline V vexp32(V x) {
    const float MAGIC = 12582912.0f; /* 1.5 * 2^23 */
    V t = x * vbits(0x3FB8AA3B);
    V n = (t + MAGIC) - MAGIC;
    V r = (x - n * vbits(0x3F317200)) - n * vbits(0x35BFBE8E);
    V p = vbits(0x39500D01);
    p = p * r + vbits(0x3AB60B61);
    p = p * r + vbits(0x3C088889);
    p = p * r + vbits(0x3D2AAAAB);
    p = p * r + vbits(0x3E2AAAAB);
    p = p * r + vbits(0x3F000000);
    p = p * r + vbits(0x3F800000);
    p = p * r + vbits(0x3F800000);
    /* in range |n| <= 151; out-of-range lanes are replaced below, clamping keeps them tame */
    V nc = vsel(n > 200.0f, vsplat(200.0f), vsel(n < -200.0f, vsplat(-200.0f), n));
    VI ni = __builtin_convertvector(nc, VI);
    V mid = p * vpow2(vclamp(ni, -126, 127));
    V hi = (p * vpow2(visplat(127))) * vpow2(vclamp(ni - 127, -126, 127));
    V lo = (p * vpow2(vclamp(ni + 126, -126, 127))) * vpow2(visplat(-126));
    V res = vsel(ni > 127, hi, vsel(ni < -126, lo, mid));
    res = vsel(x < -104.0f, vsplat(0.0f), res);
    res = vsel(x > 89.0f, vsplat(INFINITY), res);
    return vsel(x != x, x, res);
}

static inline V vlog32(V x) {
    VI sub = x < f_of(0x00800000);
    V xs = vsel(sub, x * pow2i(23), x);
    VI e = visel(sub, visplat(-23), visplat(0));
    VU b = (VU)xs;
    e = e + (VI)((b >> 23) & 0xFFu) - 127;
    V m = (V)((b & 0x007FFFFFu) | 0x3F800000u);
    VI big = m > f_of(0x3FB504F3);
    m = vsel(big, m * 0.5f, m);
    e = e + (big & 1);
    V f = m - 1.0f;
    V s = f / (2.0f + f);
    V z = s * s;
    V R = z * (vbits(0x3F2AAAAB) + z * (vbits(0x3ECCCCCD) + z * (vbits(0x3E924925) +
                                                                   z * vbits(0x3E638E39))));
    V lm = s * (2.0f + R);
    V E = __builtin_convertvector(e, V);
    V res = E * vbits(0x3F317200) + (lm + E * vbits(0x35BFBE8E));
    res = vsel(x == INFINITY, vsplat(INFINITY), res);
    res = vsel(x == 0.0f, vsplat(-INFINITY), res);
    return vsel((x != x) | (x < 0.0f), vbits(0x7FC00000), res);
}

static inline V vabs(V x) { return (V)((VU)x & 0x7FFFFFFFu); }
/* r with x's sign bit set where x's is (r is +1 or positive), x itself where x is NaN */
static inline V vodd(V x, V r) {
    V neg = (V)((VU)r ^ 0x80000000u);
    return vsel(x != x, x, vsel((VI)x < 0, neg, r));
}

static inline V vtanh32(V x) {
    V a = vabs(x);
    V e = vexp32(a + a);
    V r = 1.0f - 2.0f / (e + 1.0f);
    return vodd(x, vsel(a > f_of(0x41100000), vsplat(1.0f), r));
}

static inline V verf32(V x) {
    V a = vabs(x);
    V t = 1.0f / (1.0f + vbits(0x3EA7BA05) * a);
    V p = vbits(0x3F87DC22);
    p = p * t + vbits(0xBFBA00E3);
    p = p * t + vbits(0x3FB5F0E3);
    p = p * t + vbits(0xBE91A98E);
    p = p * t + vbits(0x3E827906);
    p = p * t;
    V r = 1.0f - p * vexp32((V)((VU)(a * a) ^ 0x80000000u));
    return vodd(x, vsel(a >= 4.0f, vsplat(1.0f), r));
}

/* y[i] = f(x[i]) for n elements: whole vectors, then the tail through a zero-padded vector */
#define VEC_MAP(name, fn)                                                                        \
    void name(const float *x, float *y, long n) {                                              \
        long i = 0;                                                                            \
        for (; i + EW <= n; i += EW) {                                                         \
            V v;                                                                               \
            memcpy(&v, x + i, sizeof(V));                                                      \
            v = fn(v);                                                                         \
            memcpy(y + i, &v, sizeof(V));                                                      \
        }                                                                                      \
        if (i < n) {                                                                           \
            V v = {0};                                                                         \
            memcpy(&v, x + i, sizeof(float) * (size_t)(n - i));                                \
            v = fn(v);                                                                         \
            memcpy(y + i, &v, sizeof(float) * (size_t)(n - i));                                \
        }                                                                                      \
    }

VEC_MAP(vtp_exp32, vexp32)
VEC_MAP(vtp_log32, vlog32)
VEC_MAP(vtp_tanh32, vtanh32)
VEC_MAP(vtp_erf32, verf32)

/* The scalar functions, kept as the specification's direct transcription: tests compare the
 * vector kernels against them over special values and every exponent. */
void vtp_exp32_scalar(const float *x, float *y, long n) {
    for (long i = 0; i < n; i++) y[i] = exp32(x[i]);
}
void vtp_log32_scalar(const float *x, float *y, long n) {
    for (long i = 0; i < n; i++) y[i] = log32(x[i]);
}
void vtp_tanh32_scalar(const float *x, float *y, long n) {
    for (long i = 0; i < n; i++) y[i] = tanh32(x[i]);
}
void vtp_erf32_scalar(const float *x, float *y, long n) {
    for (long i = 0; i < n; i++) y[i] = erf32(x[i]);
}

/* index_add_rows (PROTOCOL §2.6): out[idx[j], :] += src[j, :] for j ascending; out holds
 * dest already. Indices are checked by the caller. */
void vtp_index_add_rows(float *out, const int32_t *idx, const float *src, long n, long D) {
    for (long j = 0; j < n; j++) {
        float *row = out + (long)idx[j] * D;
        const float *s = src + j * D;
        for (long d = 0; d < D; d++) row[d] = row[d] + s[d];
    }
}

/* relu / relu_bwd (PROTOCOL §2): pure selects, no arithmetic. */
void vtp_relu(const float *x, float *y, long n) {
    for (long i = 0; i < n; i++) {
        float v = x[i];
        y[i] = v > 0.0f ? v : (v != v ? v : 0.0f);
    }
}

void vtp_relu_bwd(const float *g, const float *x, float *y, long n) {
    for (long i = 0; i < n; i++) {
        float v = x[i];
        y[i] = v > 0.0f ? g[i] : (v != v ? v : 0.0f);
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Fused elementwise programs. A run of a graph's elementwise nodes (PROTOCOL §2.6, codes       */
/* 64-89) over one output shape is executed as one straight-line program per block of BLK       */
/* elements: each instruction is one node, applied to the whole block, in node order. Every     */
/* output element still gets exactly its operator's operations, in the registry's order, on     */
/* the same input words; fusion only decides that intermediate values stay in a small block     */
/* buffer instead of a tensor. Broadcast inputs are read through their strides (0 on a          */
/* broadcast axis).                                                                             */

enum {
    EW_LOAD = 0, EW_STORE = 1,
    EW_ADD = 2, EW_SUB, EW_MUL, EW_DIV, EW_MAX, EW_MIN, EW_GT, EW_GE, EW_LT, EW_LE, EW_EQ, EW_NE,
    EW_IADD = 14, EW_ISUB, EW_IMUL, EW_IMAX, EW_IMIN, EW_IGT, EW_IGE, EW_ILT, EW_ILE, EW_IEQ,
    EW_INE,
    EW_WHERE = 25, EW_NEG, EW_INEG, EW_EXP, EW_LOG, EW_SQRT, EW_RELU, EW_TANH, EW_ERF,
    EW_CAST_I32, EW_CAST_F32, EW_NOT,
    EW_NOPS
};

#define BLK 512
#define EW_MAXDIM 8

typedef struct {
    const long *hdr;    /* see vtp_ew_run */
    void *const *ptrs;  /* input pointers, then output pointers */
    long b0, b1;        /* blocks of this worker */
} ew_job;

/* dst[0 .. len) = the input's elements start .. start+len of the output's row-major order */
static void ew_gather(uint32_t *dst, const uint32_t *base, const long *shape, const long *st,
                      int nd, long start, long len) {
    long idx[EW_MAXDIM], off = 0, rem = start;
    for (int d = nd - 1; d >= 0; d--) {
        idx[d] = rem % shape[d];
        rem /= shape[d];
        off += idx[d] * st[d];
    }
    long i = 0, s = st[nd - 1];
    while (i < len) {
        long run = shape[nd - 1] - idx[nd - 1];
        if (run > len - i) run = len - i;
        if (s == 1) memcpy(dst + i, base + off, 4 * (size_t)run);
        else if (s == 0) {
            uint32_t v = base[off];
            for (long k = 0; k < run; k++) dst[i + k] = v;
        } else
            for (long k = 0; k < run; k++) dst[i + k] = base[off + k * s];
        i += run;
        idx[nd - 1] += run;
        off += run * s;
        for (int d = nd - 1; d > 0 && idx[d] == shape[d]; d--) {
            off -= shape[d] * st[d];
            idx[d] = 0;
            idx[d - 1]++;
            off += st[d - 1];
        }
    }
}

#define LOOP(expr)                                                                             \
    for (long i = 0; i < len; i++) expr;

static void ew_block(const long *hdr, void *const *ptrs, long start, long len, uint32_t *buf,
                     uint32_t **reg) {
    int nd = (int)hdr[1];
    const long *shape = hdr + 2;
    long nin = hdr[2 + nd], ninstr = hdr[4 + nd];
    const long *ins = hdr + 6 + nd;             /* per input: kind, strides[nd] */
    const long *prog = ins + nin * (1 + nd);    /* per instruction: op, d, a, b, c */
    for (long k = 0; k < ninstr; k++) {
        const long *I = prog + 5 * k;
        long op = I[0], d = I[1];
        if (op == EW_LOAD) {
            const long *in = ins + I[2] * (1 + nd);
            const uint32_t *base = (const uint32_t *)ptrs[I[2]];
            if (in[0] == 0) {
                reg[d] = (uint32_t *)base + start; /* contiguous: read in place */
            } else {
                reg[d] = buf + d * BLK;
                if (in[0] == 1) {
                    uint32_t v = base[0];
                    for (long i = 0; i < len; i++) reg[d][i] = v;
                } else {
                    ew_gather(reg[d], base, shape, in + 1, nd, start, len);
                }
            }
            continue;
        }
        if (op == EW_STORE) {
            memcpy((uint32_t *)ptrs[nin + d] + start, reg[I[2]], 4 * (size_t)len);
            continue;
        }
        uint32_t *restrict o = buf + d * BLK;
        const uint32_t *restrict ua = reg[I[2]];
        const uint32_t *restrict ub = I[3] >= 0 ? reg[I[3]] : ua;
        const uint32_t *restrict uc = I[4] >= 0 ? reg[I[4]] : ua;
        float *restrict fo = (float *)o;
        const float *restrict a = (const float *)ua;
        const float *restrict b = (const float *)ub;
        const int32_t *restrict ia = (const int32_t *)ua;
        const int32_t *restrict ib = (const int32_t *)ub;
        int32_t *restrict io = (int32_t *)o;
        switch (op) {
        case EW_ADD: LOOP(fo[i] = a[i] + b[i]) break;
        case EW_SUB: LOOP(fo[i] = a[i] - b[i]) break;
        case EW_MUL: LOOP(fo[i] = a[i] * b[i]) break;
        case EW_DIV: LOOP(fo[i] = a[i] / b[i]) break;
        case EW_MAX:
            LOOP(o[i] = (a[i] != a[i] || b[i] != b[i]) ? 0x7FC00000u : (a[i] > b[i] ? ua[i] : ub[i]))
            break;
        case EW_MIN:
            LOOP(o[i] = (a[i] != a[i] || b[i] != b[i]) ? 0x7FC00000u : (a[i] < b[i] ? ua[i] : ub[i]))
            break;
        case EW_GT: LOOP(io[i] = a[i] > b[i]) break;
        case EW_GE: LOOP(io[i] = a[i] >= b[i]) break;
        case EW_LT: LOOP(io[i] = a[i] < b[i]) break;
        case EW_LE: LOOP(io[i] = a[i] <= b[i]) break;
        case EW_EQ: LOOP(io[i] = a[i] == b[i]) break;
        case EW_NE: LOOP(io[i] = a[i] != b[i]) break;
        case EW_IADD: LOOP(o[i] = ua[i] + ub[i]) break;
        case EW_ISUB: LOOP(o[i] = ua[i] - ub[i]) break;
        case EW_IMUL: LOOP(o[i] = ua[i] * ub[i]) break;
        case EW_IMAX: LOOP(io[i] = ia[i] > ib[i] ? ia[i] : ib[i]) break;
        case EW_IMIN: LOOP(io[i] = ia[i] < ib[i] ? ia[i] : ib[i]) break;
        case EW_IGT: LOOP(io[i] = ia[i] > ib[i]) break;
        case EW_IGE: LOOP(io[i] = ia[i] >= ib[i]) break;
        case EW_ILT: LOOP(io[i] = ia[i] < ib[i]) break;
        case EW_ILE: LOOP(io[i] = ia[i] <= ib[i]) break;
        case EW_IEQ: LOOP(io[i] = ia[i] == ib[i]) break;
        case EW_INE: LOOP(io[i] = ia[i] != ib[i]) break;
        case EW_WHERE: LOOP(o[i] = ua[i] != 0 ? ub[i] : uc[i]) break;
        case EW_NEG: LOOP(o[i] = ua[i] ^ 0x80000000u) break;
        case EW_INEG: LOOP(o[i] = 0u - ua[i]) break;
        case EW_EXP: vtp_exp32(a, fo, len); break;
        case EW_LOG: vtp_log32(a, fo, len); break;
        case EW_TANH: vtp_tanh32(a, fo, len); break;
        case EW_ERF: vtp_erf32(a, fo, len); break;
        case EW_SQRT: LOOP(fo[i] = sqrtf(a[i])) break;
        case EW_RELU: LOOP(o[i] = a[i] > 0.0f ? ua[i] : (a[i] != a[i] ? ua[i] : 0u)) break;
        case EW_CAST_I32:
            LOOP(io[i] = (a[i] >= -2147483648.0f && a[i] < 2147483648.0f) ? (int32_t)a[i]
                                                                           : INT32_MIN)
            break;
        case EW_CAST_F32: LOOP(fo[i] = (float)ia[i]) break;
        case EW_NOT: LOOP(io[i] = ia[i] == 0) break;
        default: abort();
        }
        reg[d] = o;
    }
}

static void *ew_worker(void *arg) {
    const ew_job *J = (const ew_job *)arg;
    const long *hdr = J->hdr;
    int nd = (int)hdr[1];
    long n = hdr[0], nregs = hdr[5 + nd];
    uint32_t *buf = (uint32_t *)falloc((size_t)(nregs * BLK));
    uint32_t **reg = malloc(sizeof(uint32_t *) * (size_t)(nregs ? nregs : 1));
    for (long blk = J->b0; blk < J->b1; blk++) {
        long start = blk * BLK;
        long len = n - start < BLK ? n - start : BLK;
        ew_block(hdr, J->ptrs, start, len, buf, reg);
    }
    free(reg);
    free(buf);
    return NULL;
}

/* hdr: n (elements), nd, shape[nd], nin, nout, ninstr, nregs, then per input (kind: 0 contiguous
 * with n elements, 1 one element, 2 strided; strides[nd] in elements, 0 on broadcast axes), then
 * per instruction (op, d, a, b, c): LOAD reg d <- input a; STORE output d <- reg a; otherwise reg
 * d <- op(reg a, reg b, reg c) (-1 for an unused operand). ptrs: inputs, then outputs. Threads
 * split the blocks; a block is computed the same way by any of them. */
void vtp_ew_run(const long *hdr, void *const *ptrs, int nthreads) {
    long n = hdr[0];
    long nblk = (n + BLK - 1) / BLK;
    if (nblk == 0) return;
    if (nthreads > 16) nthreads = 16;
    if (nthreads < 1 || n < 65536) nthreads = 1;
    if (nthreads > nblk) nthreads = (int)nblk;
    ew_job jobs[16];
    pthread_t th[16];
    for (int t = 0; t < nthreads; t++) {
        ew_job j = {hdr, ptrs, nblk * t / nthreads, nblk * (t + 1) / nthreads};
        jobs[t] = j;
    }
    int started = 0;
    for (int t = 1; t < nthreads; t++)
        if (pthread_create(&th[t], NULL, ew_worker, &jobs[t]) == 0) started = t;
        else break;
    for (int t = started + 1; t < nthreads; t++) ew_worker(&jobs[t]);
    ew_worker(&jobs[0]);
    for (int t = 1; t <= started; t++) pthread_join(th[t], NULL);
}

/* Two batch axes (b0, b1) with their own strides: attention's (batch, head) products read
 * straight from permuted views. C is contiguous (b0, b1, M, N). */
void vtp_matmul_nt_batch2(const float *A, long nb0, long nb1, long sa0, long sa1, long sam,
                          long sak, const float *B, long sb0, long sb1, long sbn, long sbk,
                          float *C, long M, long N, long K, int nthreads) {
    for (long i = 0; i < nb0; i++)
        for (long j = 0; j < nb1; j++)
            vtp_matmul_nt(A + i * sa0 + j * sa1, sam, sak, B + i * sb0 + j * sb1, sbn, sbk,
                          C + (i * nb1 + j) * M * N, M, N, K, nthreads);
}

/* ------------------------------------------------------------------------------------------ */
/* argmax_last (PROTOCOL §2.6): per row, the index of the first NaN, else of the first maximum */
/* (f32); of the first maximum (i32). Comparisons only.                                        */

void vtp_row_argmax(const float *A, long sr, long sc, int32_t *out, long M, long N) {
    for (long i = 0; i < M; i++) {
        float m = A[i * sr];
        int32_t at = 0;
        for (long j = 1; j < N; j++) {
            float v = A[i * sr + j * sc];
            if (m == m && (v > m || v != v)) {
                m = v;
                at = (int32_t)j;
            }
        }
        out[i] = at;
    }
}

void vtp_row_argmax_i32(const int32_t *A, long sr, long sc, int32_t *out, long M, long N) {
    for (long i = 0; i < M; i++) {
        int32_t m = A[i * sr], at = 0;
        for (long j = 1; j < N; j++)
            if (A[i * sr + j * sc] > m) {
                m = A[i * sr + j * sc];
                at = (int32_t)j;
            }
        out[i] = at;
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Compiled plans (agents/training/plan.py): a run of a graph's steps as one call, so the         */
/* interpreter's per-node work (argument lists, tensor objects, one foreign call per node) is  */
/* paid once per plan instead of once per node. Arithmetic instructions call the kernels above */
/* with the arguments their node would get; the data-movement ones copy 4-byte words.         */
/* Operands are (slot, offset): the address slots[slot] + 4 * offset.                          */

enum { PL_EW = 1, PL_MM, PL_RED, PL_COPY, PL_GATHER, PL_SCATTER, PL_ROWS, PL_ROWS_ADD, PL_UNIFORM };

#define PL_ADDR(slots, s, o) ((void *)((char *)(slots)[(s)] + 4 * (o)))
#define PL_MAXDIM 8

/* Row-major walk over `shape` (nd <= PL_MAXDIM) keeping two operands' offsets. */
typedef struct {
    int nd;
    long idx[PL_MAXDIM], a, b;
    const long *shape, *sa, *sb;
} walk2;

static void walk_start(walk2 *w, int nd, const long *shape, const long *sa, const long *sb) {
    w->nd = nd;
    w->shape = shape;
    w->sa = sa;
    w->sb = sb;
    w->a = w->b = 0;
    for (int d = 0; d < nd; d++) w->idx[d] = 0;
}

static void walk_next(walk2 *w) {
    for (int d = w->nd - 1; d >= 0; d--) {
        w->a += w->sa[d];
        w->b += w->sb[d];
        if (++w->idx[d] < w->shape[d]) return;
        w->a -= w->sa[d] * w->shape[d];
        w->b -= w->sb[d] * w->shape[d];
        w->idx[d] = 0;
    }
}

/* dst (strided) <- src (strided) over `shape`: the last axis as one loop (memcpy on unit
 * strides), the others walked */
static void pl_copy(uint32_t *dst, const long *sd, const uint32_t *src, const long *ss, int nd,
                    const long *shape) {
    long outer = 1, n = nd ? shape[nd - 1] : 1, a = nd ? sd[nd - 1] : 0, b = nd ? ss[nd - 1] : 0;
    for (int d = 0; d + 1 < nd; d++) outer *= shape[d];
    if (outer == 0 || n == 0) return;
    walk2 w;
    walk_start(&w, nd ? nd - 1 : 0, shape, sd, ss);
    for (long r = 0; r < outer; r++) {
        uint32_t *o = dst + w.a;
        const uint32_t *i = src + w.b;
        if (a == 1 && b == 1) memcpy(o, i, 4 * (size_t)n);
        else
            for (long e = 0; e < n; e++) o[e * a] = i[e * b];
        walk_next(&w);
    }
}

/* gather (scatter = 0: out[p] = x[p with p[dim] = idx[p]], out contiguous over idx's shape) or
 * scatter_value (scatter = 1: x[p with p[dim] = idx[p]] = word, x strided). Returns 0, or 1
 * when an index is outside [0, size). The last axis is one loop; the others are walked. */
static int pl_index(int scatter, int nd, int dim, long size, uint32_t *out, uint32_t *x,
                    const int32_t *idx, const long *shape, const long *sx, const long *si,
                    uint32_t word) {
    long outer = 1, n = shape[nd - 1], xl = sx[nd - 1], il = si[nd - 1], sdim = sx[dim];
    for (int d = 0; d + 1 < nd; d++) outer *= shape[d];
    walk2 w;
    walk_start(&w, nd - 1, shape, sx, si);
    long e = 0;
    for (long r = 0; r < outer; r++) {
        /* x's row without its position along dim (added back from idx) */
        long xa = w.a - (dim < nd - 1 ? w.idx[dim] * sdim : 0);
        const int32_t *ir = idx + w.b;
        long xs = dim == nd - 1 ? 0 : xl;
        for (long i = 0; i < n; i++) {
            long j = ir[i * il];
            if (j < 0 || j >= size) return 1;
            long at = xa + j * sdim + i * xs;
            if (scatter) x[at] = word;
            else out[e + i] = x[at];
        }
        e += n;
        walk_next(&w);
    }
    return 0;
}

/* The registry's `uniform` (registry.py uniform_word): element e is (x0 >> 8) * 2^-24, x0 the
 * first word of Philox4x32-10 on counter (e, site, t, 0) under key (k0, k1). Both factors are
 * exact in binary32 (a 24-bit integer, a power of two), so the product is the exact value. */
static void pl_uniform(float *out, const uint32_t *step, long n, uint32_t site) {
    for (long e = 0; e < n; e++) {
        uint32_t c0 = (uint32_t)e, c1 = site, c2 = step[2], c3 = 0, k0 = step[0], k1 = step[1];
        for (int r = 0; r < 10; r++) {
            if (r) {
                k0 += 0x9E3779B9u;
                k1 += 0xBB67AE85u;
            }
            uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
            uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
            c1 = (uint32_t)p1;
            c3 = (uint32_t)p0;
            c0 = n0;
            c2 = n2;
        }
        out[e] = (float)(c0 >> 8) * 0x1p-24f;
    }
}

/* code: instructions, each [op, length in words, operands...]; runs `count` of them and
 * returns 0, or k + 1 when instruction k found an index out of its range (nothing after it
 * runs). Operands:
 *   PL_EW:      nptrs, (slot, off) x nptrs (inputs then outputs), then the vtp_ew_run header
 *   PL_MM:      A (slot, off), nb0, nb1, sa0, sa1, sam, sak, B (slot, off), sb0, sb1, sbn, sbk,
 *               C (slot, off), M, N, K                       -> vtp_matmul_nt_batch2
 *   PL_RED:     kind (0 f32 sum, 1 f32 max, 2 i32 sum, 3 i32 max, 4 f32 argmax, 5 i32 argmax),
 *               src (slot, off), sr, sc, dst (slot, off), M, N
 *   PL_COPY:    nd, dst (slot, off), src (slot, off), shape[nd], dst strides[nd], src strides[nd]
 *   PL_GATHER:  nd, dim, size of x along dim, out (slot, off) contiguous, x (slot, off),
 *               idx (slot, off), shape[nd] (idx's = out's), x strides[nd], idx strides[nd]:
 *               out[p] = x[p with p[dim] = idx[p]]
 *   PL_SCATTER: nd, dim, word, size of out along dim, out (slot, off), idx (slot, off),
 *               idx shape[nd], out strides[nd], idx strides[nd]: out[p with p[dim] = idx[p]] =
 *               word (out already holds x)
 *   PL_ROWS:    out (slot, off), W (slot, off), idx (slot, off), n, D, rows: out row i = W row
 *               idx[i] (all contiguous)
 *   PL_ROWS_ADD: out (slot, off), idx (slot, off), src (slot, off), n, D, rows: out row idx[j]
 *               += src row j, j ascending (out already holds dest) -> vtp_index_add_rows
 *   PL_UNIFORM: out (slot, off) contiguous, step (slot, off) (k0, k1, t), n, site: the registry's
 *               `uniform` -> pl_uniform */
long vtp_plan_run(const long *code, long count, void *const *slots, int nthreads) {
    for (long k = 0; k < count; k++) {
        const long *I = code;
        code += I[1];
        switch (I[0]) {
        case PL_EW: {
            long np = I[2];
            void *stack[256];
            void **ptrs = np <= 256 ? stack : malloc(sizeof(void *) * (size_t)np);
            if (!ptrs) abort();
            for (long p = 0; p < np; p++) ptrs[p] = PL_ADDR(slots, I[3 + 2 * p], I[4 + 2 * p]);
            vtp_ew_run(I + 3 + 2 * np, ptrs, nthreads);
            if (ptrs != stack) free(ptrs);
            break;
        }
        case PL_MM:
            vtp_matmul_nt_batch2((const float *)PL_ADDR(slots, I[2], I[3]), I[4], I[5], I[6],
                                 I[7], I[8], I[9], (const float *)PL_ADDR(slots, I[10], I[11]),
                                 I[12], I[13], I[14], I[15],
                                 (float *)PL_ADDR(slots, I[16], I[17]), I[18], I[19], I[20],
                                 nthreads);
            break;
        case PL_RED: {
            const void *src = PL_ADDR(slots, I[3], I[4]);
            void *dst = PL_ADDR(slots, I[7], I[8]);
            long sr = I[5], sc = I[6], M = I[9], N = I[10];
            switch (I[2]) {
            case 0: vtp_row_sum(src, sr, sc, dst, M, N); break;
            case 1: vtp_row_max(src, sr, sc, dst, M, N); break;
            case 2: vtp_row_sum_i32(src, sr, sc, dst, M, N); break;
            case 3: vtp_row_max_i32(src, sr, sc, dst, M, N); break;
            case 4: vtp_row_argmax(src, sr, sc, dst, M, N); break;
            case 5: vtp_row_argmax_i32(src, sr, sc, dst, M, N); break;
            default: abort();
            }
            break;
        }
        case PL_COPY: {
            int nd = (int)I[2];
            if (nd > PL_MAXDIM) abort();
            const long *shape = I + 7;
            pl_copy(PL_ADDR(slots, I[3], I[4]), shape + nd, PL_ADDR(slots, I[5], I[6]),
                    shape + 2 * nd, nd, shape);
            break;
        }
        case PL_GATHER: {
            int nd = (int)I[2];
            if (nd < 1 || nd > PL_MAXDIM) abort();
            const long *shape = I + 11;
            if (pl_index(0, nd, (int)I[3], I[4], PL_ADDR(slots, I[5], I[6]),
                         PL_ADDR(slots, I[7], I[8]), PL_ADDR(slots, I[9], I[10]), shape,
                         shape + nd, shape + 2 * nd, 0))
                return k + 1;
            break;
        }
        case PL_SCATTER: {
            int nd = (int)I[2];
            if (nd < 1 || nd > PL_MAXDIM) abort();
            const long *shape = I + 10;
            if (pl_index(1, nd, (int)I[3], I[5], NULL, PL_ADDR(slots, I[6], I[7]),
                         PL_ADDR(slots, I[8], I[9]), shape, shape + nd, shape + 2 * nd,
                         (uint32_t)I[4]))
                return k + 1;
            break;
        }
        case PL_ROWS: {
            uint32_t *out = PL_ADDR(slots, I[2], I[3]);
            const uint32_t *W = PL_ADDR(slots, I[4], I[5]);
            const int32_t *idx = PL_ADDR(slots, I[6], I[7]);
            long n = I[8], D = I[9], rows = I[10];
            for (long i = 0; i < n; i++)
                if (idx[i] < 0 || idx[i] >= rows) return k + 1;
            for (long i = 0; i < n; i++) memcpy(out + i * D, W + idx[i] * D, 4 * (size_t)D);
            break;
        }
        case PL_ROWS_ADD: {
            float *out = PL_ADDR(slots, I[2], I[3]);
            const int32_t *idx = PL_ADDR(slots, I[4], I[5]);
            const float *src = PL_ADDR(slots, I[6], I[7]);
            long n = I[8], D = I[9], rows = I[10];
            for (long i = 0; i < n; i++)
                if (idx[i] < 0 || idx[i] >= rows) return k + 1;
            vtp_index_add_rows(out, idx, src, n, D);
            break;
        }
        case PL_UNIFORM:
            pl_uniform(PL_ADDR(slots, I[2], I[3]), PL_ADDR(slots, I[4], I[5]), I[6],
                       (uint32_t)I[7]);
            break;
        default: abort();
        }
    }
    return 0;
}
