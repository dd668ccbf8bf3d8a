/*===- loomrt.h - the Loom runtime C API ------------------------*- C -*-===//
 *
 * The only bridge between the compiler and the runtime: the C++ that
 * `loomc` generates calls these functions, and a backend (host: OpenBLAS and
 * C++ kernels; cuda: cuBLAS and CUDA kernels) implements them.
 *
 * Memory. A `loomrt_buf *` is a handle to device memory (host memory on the
 * host backend) that the generated code never dereferences. Persistent
 * tensors (parameters, optimizer state, inputs, the step counter, the loss)
 * are owned by the runtime; every other value lives in the arena of the
 * running function at an offset chosen at compile time by the memory plan.
 *
 * Ordering. Every kernel and copy is enqueued on the context's stream and
 * runs in call order; it may return before it completes (the cuda backend
 * is asynchronous). `loomrt_sync` waits for everything enqueued.
 *
 * Kernels. For each train op `train.X` there is one `loomrt_X`. Its
 * arguments follow one rule, which the code generator applies to every op:
 *   1. the context;
 *   2. the result buffers, then the operand buffers (an absent optional
 *      tensor operand or result is NULL; an `index` operand is an int64_t,
 *      -1 when absent);
 *   3. a shape id per result, then per tensor operand (-1 when absent): an
 *      offset into the program's shape table, where a shape is stored as
 *      its rank followed by its dimensions;
 *   4. for an op with a variadic operand, which is passed one element per
 *      call: the element's position and the element count;
 *   5. the op's attributes, in alphabetical order of their names: floats as
 *      double, integers as int64_t, unit attributes and enums as int32_t,
 *      integer arrays as a shape id (the array stored like a shape), a
 *      type as a loomrt_dtype, and #train.* attributes as their parameters
 *      in declaration order.
 * All tensors are dense and row-major.
 *
 *===----------------------------------------------------------------------===*/

#ifndef LOOMRT_LOOMRT_H
#define LOOMRT_LOOMRT_H

#include <stddef.h> /* size_t and ptrdiff_t, used by generated loops */
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct loomrt_ctx loomrt_ctx;
typedef struct loomrt_buf loomrt_buf;

typedef enum loomrt_dtype {
  LOOMRT_F32 = 0,
  LOOMRT_BF16 = 1,
  LOOMRT_I32 = 2,
  LOOMRT_I64 = 3,
} loomrt_dtype;

/* What a persistent tensor is for. */
typedef enum loomrt_role {
  LOOMRT_PARAM = 0,     /* trainable parameter, initialized by its init */
  LOOMRT_STATE = 1,     /* optimizer state, zero at the first step */
  LOOMRT_INPUT = 2,     /* filled by the data loader before each step */
  LOOMRT_ITERATION = 3, /* f32 scalar: the 0-based optimizer step */
  LOOMRT_LOSS = 4,      /* f32 scalar written by the step */
} loomrt_role;

/* Initializers, in the order of #train.init's kinds. */
typedef enum loomrt_init {
  LOOMRT_INIT_NORMAL = 0,
  LOOMRT_INIT_UNIFORM = 1,
  LOOMRT_INIT_ZEROS = 2,
  LOOMRT_INIT_ONES = 3,
  LOOMRT_INIT_CONSTANT = 4,
} loomrt_init;

typedef struct loomrt_tensor_desc {
  const char *name;
  int32_t role;      /* loomrt_role */
  int32_t dtype;     /* loomrt_dtype */
  int64_t shape;     /* shape id */
  int32_t init;      /* loomrt_init, for parameters */
  double init_value; /* std (normal), bound (uniform) or the constant */
  /* For integer inputs: values lie in [0, bound) (the vocabulary or the
     number of classes of the op that consumes them); 0 when unknown. */
  int64_t bound;
  /* A tensor stored as this rank's block of a sharded whole: the whole
     tensor's shape id and the shape id of its per-dimension groups (the
     runtime group whose rank selects the block, 0 where not split); both
     are empty (rank 0) for a whole tensor. Initialization, --init-from and
     --export work on the whole tensor's element indices. */
  int64_t global_shape;
  int64_t shard_groups;
  /* A parameter that holds one pipeline stage's part of a stacked tensor:
     the whole tensor's name (NULL for a tensor that is no part), shape id
     and the shape id of the part's offsets in it. Initialization,
     --init-from and --export use the whole tensor's name and indices. */
  const char *part_of;
  int64_t part_whole;
  int64_t part_offsets;
  /* The ranks that hold the tensor: every rank when `held_axis` is -1,
     else those whose coordinate c on mesh axis `held_axis` has bit c of
     `held_mask` set (a pipeline stage's parameters and optimizer state
     live on its ranks only). The others allocate nothing for it. */
  int32_t held_axis;
  int64_t held_mask;
} loomrt_tensor_desc;

typedef struct loomrt_function {
  const char *name;
  int64_t arena_bytes; /* peak of the memory plan */
  void (*run)(loomrt_ctx *);
} loomrt_function;

typedef struct loomrt_program {
  const char *name;
  const loomrt_tensor_desc *tensors;
  int64_t num_tensors;
  const int64_t *shapes;
  int64_t num_shape_words;
  loomrt_function step; /* forward, backward, optimizer update */
  loomrt_function eval; /* forward only: the loss on a batch */
  /* The mesh, axes outermost first; every rank runs the same program. */
  int32_t num_axes;
  const char *const *axis_names;
  const int64_t *axis_sizes;
  /* The arena each rank allocates: `arena_bytes[c]` on the ranks whose
     coordinate on mesh axis `arena_axis` is c (a pipeline rank plans only
     its stages' values), or `arena_bytes[0]` everywhere when `arena_axis`
     is -1. */
  int32_t arena_axis;
  const int64_t *arena_bytes;
  /* The f32 copies the largest bf16 kernel call computes on (its bf16
     tensors widened, each at a multiple of 64 bytes, as the compiler's
     analysis::bf16ScratchBytes counts them), reserved once: 0 for a
     program without bf16 kernels. */
  int64_t bf16_scratch_bytes;
} loomrt_program;

/* Runs the training loop of `program` with the command line of the
   generated executable (see `--help`). Returns the process exit code. */
int loomrt_main(int argc, char **argv, const loomrt_program *program);

/*===--- Processes, mesh groups and collectives ----------------------------===*/

/* Initializes the process layer: MPI (rank and world from the launcher:
   mpirun, srun or a PMI launcher), and the mesh, whose axes are given in
   device order, outermost first. Exits non-zero on every rank, with a
   message, when the launched world does not have the mesh's size. */
void loomrt_init_mesh(loomrt_ctx *ctx, int32_t num_axes,
                      const char *const *axis_names, const int64_t *axis_sizes);
void loomrt_finalize(loomrt_ctx *ctx);
/* What the launcher's environment says about this process (OpenMPI, Slurm,
   PMIx or PMI variables, in that order), before MPI starts: the launcher's
   name ("none" without one), rank, world size and local rank. */
const char *loomrt_launch_info(int32_t *rank, int32_t *world,
                               int32_t *local_rank);
int32_t loomrt_rank(loomrt_ctx *ctx);
/* This rank's coordinate on mesh axis `axis` (in device order). */
int64_t loomrt_mesh_coord(loomrt_ctx *ctx, int32_t axis);
int32_t loomrt_world_size(loomrt_ctx *ctx);
int32_t loomrt_local_rank(loomrt_ctx *ctx);

/* A group is a set of mesh axes, as a bit mask (bit i: axis i): the ranks
   that differ only in those coordinates, ordered by them (row-major). */
int32_t loomrt_group_rank(loomrt_ctx *ctx, uint32_t group);
int32_t loomrt_group_size(loomrt_ctx *ctx, uint32_t group);

/* Collective kinds, for the byte counters. */
typedef enum loomrt_collective {
  LOOMRT_ALL_REDUCE = 0,
  LOOMRT_ALL_GATHER = 1,
  LOOMRT_REDUCE_SCATTER = 2,
  LOOMRT_ALL_TO_ALL = 3,
  LOOMRT_BROADCAST = 4,
  LOOMRT_SEND = 5,
} loomrt_collective;

typedef enum loomrt_reduction { LOOMRT_SUM = 0, LOOMRT_MAX = 1 } loomrt_reduction;

/* Every wait for another rank is bounded by this many seconds (default 60):
   past it the rank names the peer it waits for and aborts the job. */
void loomrt_set_timeout(loomrt_ctx *ctx, double seconds);
/* Bytes this rank has sent in collectives of `kind` over `group`. */
int64_t loomrt_bytes_sent(loomrt_ctx *ctx, int32_t kind, uint32_t group);
const char *loomrt_collective_name(int32_t kind);

/* Ring all-reduce in place of `count` elements (f32): each rank sends
   2 (N - 1) / N of the buffer. */
void loomrt_comm_all_reduce(loomrt_ctx *ctx, uint32_t group, loomrt_buf *data,
                       int64_t count, int32_t dtype, int32_t op);
/* `in` holds N blocks of `count_per_rank`; block r of the reduction lands
   in `out` on group rank r. */
void loomrt_comm_reduce_scatter(loomrt_ctx *ctx, uint32_t group, loomrt_buf *out,
                           loomrt_buf *in, int64_t count_per_rank,
                           int32_t dtype, int32_t op);
/* `out` receives every rank's `in`, in group-rank order. */
void loomrt_comm_all_gather(loomrt_ctx *ctx, uint32_t group, loomrt_buf *out,
                       loomrt_buf *in, int64_t count_per_rank, int32_t dtype);
/* Along an inner dimension: each rank's `in` (`count_per_rank` elements)
   is `rows` rows, and row r of `out` holds the group's row r side by side
   in group-rank order; the reduce-scatter's `in` is laid out so and each
   rank keeps its rows of the sum. The same bytes as the forms above. */
void loomrt_comm_all_gather_rows(loomrt_ctx *ctx, uint32_t group,
                                 loomrt_buf *out, loomrt_buf *in,
                                 int64_t rows, int64_t count_per_rank,
                                 int32_t dtype);
void loomrt_comm_reduce_scatter_rows(loomrt_ctx *ctx, uint32_t group,
                                     loomrt_buf *out, loomrt_buf *in,
                                     int64_t rows, int64_t count_per_rank,
                                     int32_t dtype, int32_t op);
/* Block j of `in` goes to group rank j, arriving as block r of its `out`. */
void loomrt_comm_all_to_all(loomrt_ctx *ctx, uint32_t group, loomrt_buf *out,
                       loomrt_buf *in, int64_t count_per_rank, int32_t dtype);
void loomrt_comm_broadcast(loomrt_ctx *ctx, uint32_t group, loomrt_buf *data,
                      int64_t count, int32_t dtype, int32_t root);
/* Point to point, with `peer` a group rank. */
void loomrt_comm_send(loomrt_ctx *ctx, uint32_t group, loomrt_buf *data,
                 int64_t count, int32_t dtype, int32_t peer);
void loomrt_comm_recv(loomrt_ctx *ctx, uint32_t group, loomrt_buf *data,
                 int64_t count, int32_t dtype, int32_t peer);
void loomrt_comm_barrier(loomrt_ctx *ctx, uint32_t group);
/* A buffered send: `data` is copied and sent in the background, so the
   caller never waits for the receiver; loomrt_comm_drain waits for every
   posted send (at the end of a step). */
void loomrt_comm_post(loomrt_ctx *ctx, uint32_t group, loomrt_buf *data,
                      int64_t count, int32_t dtype, int32_t peer);
void loomrt_comm_drain(loomrt_ctx *ctx);
/* Begins (begin = 1) or ends (0) a pipeline action's span in the trace,
   named as schedules name actions ("1F3": stage 1's forward of
   micro-batch 3). `kind`: 0 forward, 1 whole backward, 2 backward for the
   stage's input, 3 backward for its weights (the program's schedule, a
   table the code generator emits, drives the actions). */
void loomrt_pipeline_trace(loomrt_ctx *ctx, int64_t kind, int64_t stage,
                           int64_t micro_batch, int32_t begin);

/* Asynchronous forms: the collective starts on the context's communication
   stream (collectives run one after another in issue order, overlapping the
   caller's work) and the returned event is waited with loomrt_comm_wait,
   after which the buffers may be read or reused. Every event must be waited
   exactly once; waiting a null event (a collective not started) does
   nothing. */
typedef struct loomrt_comm_event loomrt_comm_event;
void loomrt_comm_wait(loomrt_ctx *ctx, loomrt_comm_event *event);
loomrt_comm_event *loomrt_comm_all_reduce_async(loomrt_ctx *ctx, uint32_t group,
                                                loomrt_buf *data, int64_t count,
                                                int32_t dtype, int32_t op);
loomrt_comm_event *loomrt_comm_reduce_scatter_async(
    loomrt_ctx *ctx, uint32_t group, loomrt_buf *out, loomrt_buf *in,
    int64_t count_per_rank, int32_t dtype, int32_t op);
loomrt_comm_event *loomrt_comm_all_gather_async(loomrt_ctx *ctx, uint32_t group,
                                                loomrt_buf *out, loomrt_buf *in,
                                                int64_t count_per_rank,
                                                int32_t dtype);
loomrt_comm_event *
loomrt_comm_all_gather_rows_async(loomrt_ctx *ctx, uint32_t group,
                                  loomrt_buf *out, loomrt_buf *in, int64_t rows,
                                  int64_t count_per_rank, int32_t dtype);
loomrt_comm_event *loomrt_comm_all_to_all_async(loomrt_ctx *ctx, uint32_t group,
                                                loomrt_buf *out, loomrt_buf *in,
                                                int64_t count_per_rank,
                                                int32_t dtype);
loomrt_comm_event *loomrt_comm_broadcast_async(loomrt_ctx *ctx, uint32_t group,
                                               loomrt_buf *data, int64_t count,
                                               int32_t dtype, int32_t root);
loomrt_comm_event *loomrt_comm_send_async(loomrt_ctx *ctx, uint32_t group,
                                          loomrt_buf *data, int64_t count,
                                          int32_t dtype, int32_t peer);
loomrt_comm_event *loomrt_comm_recv_async(loomrt_ctx *ctx, uint32_t group,
                                          loomrt_buf *data, int64_t count,
                                          int32_t dtype, int32_t peer);

/* A list of events waited together: the reductions a loop's iterations
   start and one wait after the loop completes (in the order added), then
   frees the list. */
typedef struct loomrt_comm_list loomrt_comm_list;
loomrt_comm_list *loomrt_comm_list_create(loomrt_ctx *ctx);
void loomrt_comm_list_add(loomrt_ctx *ctx, loomrt_comm_list *list,
                          loomrt_comm_event *event);
void loomrt_comm_list_add_bucket(loomrt_ctx *ctx, loomrt_comm_list *list,
                                 struct loomrt_comm_bucket *bucket);
void loomrt_comm_list_wait(loomrt_ctx *ctx, loomrt_comm_list *list);

/* A bucket: several f32 buffers all-reduced as one collective (one ring's
   latencies for all of them). Buffers are added and the reduction started:
   on the communication stream the buffers are packed into a staging
   buffer, reduced, unpacked into the buffers and the staging freed (it
   lives only while the reduction runs). loomrt_comm_bucket_wait waits for
   it and frees the bucket; the buffers may not be touched before. */
typedef struct loomrt_comm_bucket loomrt_comm_bucket;
loomrt_comm_bucket *loomrt_comm_bucket_create(loomrt_ctx *ctx);
void loomrt_comm_bucket_add(loomrt_ctx *ctx, loomrt_comm_bucket *bucket,
                            loomrt_buf *data, int64_t count);
void loomrt_comm_bucket_all_reduce_async(loomrt_ctx *ctx,
                                         loomrt_comm_bucket *bucket,
                                         uint32_t group, int32_t dtype);
void loomrt_comm_bucket_wait(loomrt_ctx *ctx, loomrt_comm_bucket *bucket);

/* A context for programs that call the API directly (tests, tools); the
   generated executables get theirs from loomrt_main. */
loomrt_ctx *loomrt_create(void);
void loomrt_destroy(loomrt_ctx *ctx);
/* Backend memory for such programs (after loomrt_init_mesh, which picks
   the device), and copies between it and host memory; both copies wait for
   the work enqueued before them. */
loomrt_buf *loomrt_alloc(loomrt_ctx *ctx, int64_t bytes);
void loomrt_free(loomrt_ctx *ctx, loomrt_buf *buf, int64_t bytes);
void loomrt_upload(loomrt_ctx *ctx, loomrt_buf *dst, const void *src,
                   int64_t bytes);
void loomrt_download(loomrt_ctx *ctx, void *dst, loomrt_buf *src,
                     int64_t bytes);
/* The most backend memory allocated through the runtime at once so far. */
int64_t loomrt_peak_bytes(loomrt_ctx *ctx);

/* Marks the start (begin != 0) and the end of iteration `index` of the
   program's repeat number `repeat` on the trace, as a span named
   "repeat R iteration I" (nothing when tracing is off). */
void loomrt_trace_iteration(loomrt_ctx *ctx, int64_t repeat, int64_t index,
                            int32_t begin);
/* Marks the start (begin != 0) and the end of a compute span named `name`
   on the trace (spans nest; nothing when tracing is off): a pipeline
   action, "1F3". */
void loomrt_trace_span(loomrt_ctx *ctx, const char *name, int32_t begin);

/*===--- Buffers ----------------------------------------------------------===*/

/* The persistent tensor at `index` of the program's tensor table. */
loomrt_buf *loomrt_tensor(loomrt_ctx *ctx, int32_t index);
/* The arena of the running function, `offset` bytes in. */
loomrt_buf *loomrt_scratch(loomrt_ctx *ctx, int64_t offset);
/* `base` advanced by `offset` bytes (a slice of a stacked tensor). */
loomrt_buf *loomrt_view(loomrt_ctx *ctx, loomrt_buf *base, int64_t offset);
loomrt_buf *loomrt_null(loomrt_ctx *ctx);
void loomrt_copy(loomrt_ctx *ctx, loomrt_buf *dst, loomrt_buf *src,
                 int64_t bytes);
/* The shape `shape` (a shape id of the rule above) of the running program:
   its rank, and its dimensions in `*dims`. For kernels outside the runtime
   (a dialect plugin's op, linked with loomc --kernels). */
int64_t loomrt_shape(loomrt_ctx *ctx, int64_t shape, const int64_t **dims);
/* Every element of `dst` (of shape `shape`) set to `value`. */
void loomrt_fill(loomrt_ctx *ctx, loomrt_buf *dst, int64_t shape,
                 double value);
/* The same for a bf16 `dst`: `value` rounded to bf16 once. */
void loomrt_fill_bf16(loomrt_ctx *ctx, loomrt_buf *dst, int64_t shape,
                      double value);
void loomrt_sync(loomrt_ctx *ctx);

/*===--- Kernels (one per train op, see the rule above) -------------------===*/

void loomrt_matmul(loomrt_ctx *, loomrt_buf *out, loomrt_buf *lhs, loomrt_buf *rhs, int64_t, int64_t, int64_t, int32_t transpose_lhs,
                   int32_t transpose_rhs);
void loomrt_add(loomrt_ctx *, loomrt_buf *out, loomrt_buf *lhs, loomrt_buf *rhs, int64_t, int64_t, int64_t);
void loomrt_sub(loomrt_ctx *, loomrt_buf *out, loomrt_buf *lhs, loomrt_buf *rhs, int64_t, int64_t, int64_t);
void loomrt_mul(loomrt_ctx *, loomrt_buf *out, loomrt_buf *lhs, loomrt_buf *rhs, int64_t, int64_t, int64_t);
void loomrt_div(loomrt_ctx *, loomrt_buf *out, loomrt_buf *lhs, loomrt_buf *rhs, int64_t, int64_t, int64_t);
void loomrt_relu(loomrt_ctx *, loomrt_buf *out, loomrt_buf *in, int64_t, int64_t);
void loomrt_gelu(loomrt_ctx *, loomrt_buf *out, loomrt_buf *in, int64_t, int64_t);
void loomrt_silu(loomrt_ctx *, loomrt_buf *out, loomrt_buf *in, int64_t, int64_t);
void loomrt_tanh(loomrt_ctx *, loomrt_buf *out, loomrt_buf *in, int64_t, int64_t);
void loomrt_exp(loomrt_ctx *, loomrt_buf *out, loomrt_buf *in, int64_t, int64_t);
void loomrt_log(loomrt_ctx *, loomrt_buf *out, loomrt_buf *in, int64_t, int64_t);
void loomrt_sqrt(loomrt_ctx *, loomrt_buf *out, loomrt_buf *in, int64_t, int64_t);
void loomrt_rsqrt(loomrt_ctx *, loomrt_buf *out, loomrt_buf *in, int64_t, int64_t);
void loomrt_relu_grad(loomrt_ctx *, loomrt_buf *out, loomrt_buf *in, loomrt_buf *grad, int64_t, int64_t, int64_t);
void loomrt_gelu_grad(loomrt_ctx *, loomrt_buf *out, loomrt_buf *in, loomrt_buf *grad, int64_t, int64_t, int64_t);
void loomrt_silu_grad(loomrt_ctx *, loomrt_buf *out, loomrt_buf *in, loomrt_buf *grad, int64_t, int64_t, int64_t);
void loomrt_tanh_grad(loomrt_ctx *, loomrt_buf *out, loomrt_buf *y, loomrt_buf *grad, int64_t, int64_t, int64_t);
void loomrt_scale(loomrt_ctx *, loomrt_buf *out, loomrt_buf *in, int64_t, int64_t, double factor);
void loomrt_convert(loomrt_ctx *, loomrt_buf *out, loomrt_buf *in, int64_t, int64_t, int32_t element_type);
/* Between f32 and bf16, to `element_type`: narrowing rounds as CUDA's
   __float2bfloat16_rn does (nearest, ties to even, subnormals kept,
   overflow to infinity, NaN to 0x7fff); widening is exact. */
void loomrt_convert_bf16(loomrt_ctx *, loomrt_buf *out, loomrt_buf *in, int64_t, int64_t, int32_t element_type);
void loomrt_reduce(loomrt_ctx *, loomrt_buf *out, loomrt_buf *in, int64_t, int64_t, int64_t dims, int32_t kind);
void loomrt_broadcast(loomrt_ctx *, loomrt_buf *out, loomrt_buf *in, int64_t, int64_t, int64_t dims);
void loomrt_sum_to(loomrt_ctx *, loomrt_buf *out, loomrt_buf *in, int64_t, int64_t);
void loomrt_reduce_max_grad(loomrt_ctx *, loomrt_buf *out, loomrt_buf *in, loomrt_buf *max, loomrt_buf *grad, int64_t, int64_t, int64_t, int64_t,
                            int64_t dims);
void loomrt_softmax(loomrt_ctx *, loomrt_buf *out, loomrt_buf *in, int64_t, int64_t);
void loomrt_softmax_grad(loomrt_ctx *, loomrt_buf *out, loomrt_buf *y, loomrt_buf *grad, int64_t, int64_t, int64_t);
void loomrt_layer_norm(loomrt_ctx *, loomrt_buf *out, loomrt_buf *in, loomrt_buf *gamma, loomrt_buf *beta, int64_t, int64_t, int64_t, int64_t,
                       double epsilon);
void loomrt_layer_norm_grad(loomrt_ctx *, loomrt_buf *dx, loomrt_buf *dgamma, loomrt_buf *dbeta, loomrt_buf *in, loomrt_buf *gamma,
                            loomrt_buf *grad, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, double epsilon);
void loomrt_rms_norm(loomrt_ctx *, loomrt_buf *out, loomrt_buf *in, loomrt_buf *gamma, int64_t, int64_t, int64_t, double epsilon);
void loomrt_rms_norm_grad(loomrt_ctx *, loomrt_buf *dx, loomrt_buf *dgamma, loomrt_buf *in, loomrt_buf *gamma, loomrt_buf *grad, int64_t,
                          int64_t, int64_t, int64_t, int64_t, double epsilon);
void loomrt_attention(loomrt_ctx *, loomrt_buf *out, loomrt_buf *q, loomrt_buf *k, loomrt_buf *v, int64_t, int64_t, int64_t, int64_t,
                      int32_t causal);
void loomrt_attention_grad(loomrt_ctx *, loomrt_buf *dq, loomrt_buf *dk, loomrt_buf *dv, loomrt_buf *q, loomrt_buf *k, loomrt_buf *v, loomrt_buf *grad,
                           int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int32_t causal);
void loomrt_causal_mask(loomrt_ctx *, loomrt_buf *out, loomrt_buf *in, int64_t, int64_t, double fill);
/* With a `vocab_group`, `table` (and embedding_grad's `out`) is this rank's
   block of the rows, the block its rank in that runtime group selects; ids
   outside it give zeros (add nothing). */
void loomrt_embedding(loomrt_ctx *, loomrt_buf *out, loomrt_buf *table, loomrt_buf *ids, int64_t, int64_t, int64_t,
                      int64_t vocab_group, int64_t vocab_size);
void loomrt_embedding_grad(loomrt_ctx *, loomrt_buf *out, loomrt_buf *ids, loomrt_buf *grad, int64_t, int64_t, int64_t,
                           int64_t vocab_group);
void loomrt_cross_entropy(loomrt_ctx *, loomrt_buf *out, loomrt_buf *logits, loomrt_buf *labels, int64_t, int64_t, int64_t,
                          int64_t ignore_index);
void loomrt_cross_entropy_grad(loomrt_ctx *, loomrt_buf *out, loomrt_buf *logits, loomrt_buf *labels, loomrt_buf *grad, int64_t,
                               int64_t, int64_t, int64_t, int64_t ignore_index);
/* Vocab-parallel cross-entropy: with a `vocab_group`, the logits are this
   rank's block of the classes, as for loomrt_embedding's table rows. */
void loomrt_cross_entropy_stats(loomrt_ctx *, loomrt_buf *sum, loomrt_buf *target, loomrt_buf *logits, loomrt_buf *labels,
                                loomrt_buf *max, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t ignore_index,
                                int64_t vocab_group, int64_t vocab_size);
void loomrt_cross_entropy_from_stats(loomrt_ctx *, loomrt_buf *out, loomrt_buf *max, loomrt_buf *sum, loomrt_buf *target,
                                     loomrt_buf *labels, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t ignore_index);
void loomrt_cross_entropy_grad_from_stats(loomrt_ctx *, loomrt_buf *out, loomrt_buf *logits, loomrt_buf *labels,
                                          loomrt_buf *grad, loomrt_buf *max, loomrt_buf *sum, int64_t, int64_t, int64_t,
                                          int64_t, int64_t, int64_t, int64_t ignore_index, int64_t vocab_group);
void loomrt_label_count(loomrt_ctx *, loomrt_buf *out, loomrt_buf *labels, int64_t, int64_t,
                        int64_t ignore_index);
/* `global_shape` and `shard_groups` (empty unless the tensor is sharded):
   the whole tensor's shape and, per dimension, the group whose rank selects
   this rank's block, so the mask is keyed by global element indices. */
void loomrt_dropout(loomrt_ctx *, loomrt_buf *out, loomrt_buf *in, int64_t stream, int64_t, int64_t,
                    int64_t global_shape, double rate, int64_t seed, int64_t shard_groups);
void loomrt_transpose(loomrt_ctx *, loomrt_buf *out, loomrt_buf *in, int64_t, int64_t, int64_t permutation);
void loomrt_slice(loomrt_ctx *, loomrt_buf *out, loomrt_buf *in, int64_t, int64_t, int64_t offsets, int64_t sizes);
/* This rank's block of `in` (4-byte elements), which every rank holds
   whole: `groups` gives per dimension the group whose rank selects the block
   (dist.shard). */
void loomrt_shard(loomrt_ctx *, loomrt_buf *out, loomrt_buf *in, int64_t, int64_t, int64_t groups);
/* `in` is `rows` x `block` x `inner` (f32): this rank's block (its rank in
   runtime group `group` selects it) of a dimension of `size` split in
   blocks of `block`; `out` is `in` with the elements past `size` set to
   `value` (dist.fill_padding). */
void loomrt_fill_padding(loomrt_ctx *, loomrt_buf *out, loomrt_buf *in,
                         int64_t rows, int64_t block, int64_t inner,
                         uint32_t group, int64_t size, double value);
void loomrt_pad(loomrt_ctx *, loomrt_buf *out, loomrt_buf *in, int64_t, int64_t, int64_t high, int64_t low);
void loomrt_lr_schedule(loomrt_ctx *, loomrt_buf *out, loomrt_buf *step, int64_t, int64_t, double lr, int64_t warmup,
                        int64_t total, int32_t decay, double min_lr);
/* Called once per operand: `out` is the running sum of squares from
   position 0 to count - 1. With a `replica_group`, only that group's first
   rank adds the operands (the others add nothing), so a scalar all-reduce
   over the group counts them once. */
void loomrt_sum_squares(loomrt_ctx *, loomrt_buf *out, loomrt_buf *in, int64_t, int64_t, int64_t position,
                        int64_t count, int64_t replica_group);
void loomrt_clip_factor(loomrt_ctx *, loomrt_buf *out, loomrt_buf *norm, int64_t, int64_t, double max_norm);
void loomrt_sgd_update(loomrt_ctx *, loomrt_buf *new_param, loomrt_buf *new_momentum, loomrt_buf *param, loomrt_buf *grad,
                       loomrt_buf *momentum, loomrt_buf *lr, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, double momentum_f,
                       double weight_decay);
void loomrt_adamw_update(loomrt_ctx *, loomrt_buf *new_param, loomrt_buf *new_m, loomrt_buf *new_v, loomrt_buf *param,
                         loomrt_buf *grad, loomrt_buf *m, loomrt_buf *v, loomrt_buf *lr, loomrt_buf *step, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                         int64_t, int64_t, int64_t, double beta1, double beta2, double eps,
                         double config_weight_decay, double weight_decay);

/* Accumulating entries: the arguments of the op's kernel; the results its
 * getAccumulatingResults names (matmul's, sum_to's, embedding_grad's, the
 * norms' gamma and beta gradients) get the values added to what they hold
 * (a gradient accumulator) instead of written. */
void loomrt_matmul_accumulate(loomrt_ctx *, loomrt_buf *out, loomrt_buf *lhs, loomrt_buf *rhs, int64_t, int64_t, int64_t,
                              int32_t transpose_lhs, int32_t transpose_rhs);
void loomrt_sum_to_accumulate(loomrt_ctx *, loomrt_buf *out, loomrt_buf *in, int64_t, int64_t);
void loomrt_layer_norm_grad_accumulate(loomrt_ctx *, loomrt_buf *dx, loomrt_buf *dgamma, loomrt_buf *dbeta, loomrt_buf *in,
                                       loomrt_buf *gamma, loomrt_buf *grad, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                                       double epsilon);
void loomrt_rms_norm_grad_accumulate(loomrt_ctx *, loomrt_buf *dx, loomrt_buf *dgamma, loomrt_buf *in, loomrt_buf *gamma,
                                     loomrt_buf *grad, int64_t, int64_t, int64_t, int64_t, int64_t, double epsilon);
void loomrt_embedding_grad_accumulate(loomrt_ctx *, loomrt_buf *out, loomrt_buf *ids, loomrt_buf *grad, int64_t, int64_t,
                                      int64_t, int64_t vocab_group);

/* bf16 entries: `loomrt_<op>_bf16` (and `loomrt_<op>_bf16_accumulate`)
 * take the arguments of `loomrt_<op>`, with every non-scalar float tensor
 * bf16; 0-d tensors (the loss, the learning rate, a norm) stay f32, as do
 * the softmax statistics of the vocab-parallel cross-entropy (`max`,
 * `sum`, `target`), but for loomrt_mul_bf16's 0-d `rhs`, bf16 (a bf16
 * tensor scaled by a bf16 scalar: the clip factor of bf16 gradients). They
 * compute in f32 and round each result once, as loomrt_convert_bf16 does.
 * The optimizer's (loomrt_sum_squares_bf16, loomrt_mul_bf16 by a 0-d
 * scale, the updates' `_bf16`) read bf16 in place, with no f32 copies. */
void loomrt_matmul_bf16(loomrt_ctx *, loomrt_buf *out, loomrt_buf *lhs, loomrt_buf *rhs, int64_t, int64_t, int64_t, int32_t transpose_lhs, int32_t transpose_rhs);
void loomrt_matmul_bf16_accumulate(loomrt_ctx *, loomrt_buf *out, loomrt_buf *lhs, loomrt_buf *rhs, int64_t, int64_t, int64_t, int32_t transpose_lhs, int32_t transpose_rhs);
void loomrt_sum_to_bf16_accumulate(loomrt_ctx *, loomrt_buf *out, loomrt_buf *in, int64_t, int64_t);
void loomrt_scale_bf16(loomrt_ctx *, loomrt_buf *out, loomrt_buf *in, int64_t, int64_t, double factor);
void loomrt_reduce_bf16(loomrt_ctx *, loomrt_buf *out, loomrt_buf *in, int64_t, int64_t, int64_t dims, int32_t kind);
void loomrt_broadcast_bf16(loomrt_ctx *, loomrt_buf *out, loomrt_buf *in, int64_t, int64_t, int64_t dims);
void loomrt_reduce_max_grad_bf16(loomrt_ctx *, loomrt_buf *out, loomrt_buf *in, loomrt_buf *max, loomrt_buf *grad, int64_t, int64_t, int64_t, int64_t, int64_t dims);
void loomrt_layer_norm_bf16(loomrt_ctx *, loomrt_buf *out, loomrt_buf *in, loomrt_buf *gamma, loomrt_buf *beta, int64_t, int64_t, int64_t, int64_t, double epsilon);
void loomrt_layer_norm_grad_bf16(loomrt_ctx *, loomrt_buf *dx, loomrt_buf *dgamma, loomrt_buf *dbeta, loomrt_buf *in, loomrt_buf *gamma, loomrt_buf *grad, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, double epsilon);
void loomrt_layer_norm_grad_bf16_accumulate(loomrt_ctx *, loomrt_buf *dx, loomrt_buf *dgamma, loomrt_buf *dbeta, loomrt_buf *in, loomrt_buf *gamma, loomrt_buf *grad, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, double epsilon);
void loomrt_rms_norm_bf16(loomrt_ctx *, loomrt_buf *out, loomrt_buf *in, loomrt_buf *gamma, int64_t, int64_t, int64_t, double epsilon);
void loomrt_rms_norm_grad_bf16(loomrt_ctx *, loomrt_buf *dx, loomrt_buf *dgamma, loomrt_buf *in, loomrt_buf *gamma, loomrt_buf *grad, int64_t, int64_t, int64_t, int64_t, int64_t, double epsilon);
void loomrt_rms_norm_grad_bf16_accumulate(loomrt_ctx *, loomrt_buf *dx, loomrt_buf *dgamma, loomrt_buf *in, loomrt_buf *gamma, loomrt_buf *grad, int64_t, int64_t, int64_t, int64_t, int64_t, double epsilon);
void loomrt_attention_bf16(loomrt_ctx *, loomrt_buf *out, loomrt_buf *q, loomrt_buf *k, loomrt_buf *v, int64_t, int64_t, int64_t, int64_t, int32_t causal);
void loomrt_attention_grad_bf16(loomrt_ctx *, loomrt_buf *dq, loomrt_buf *dk, loomrt_buf *dv, loomrt_buf *q, loomrt_buf *k, loomrt_buf *v, loomrt_buf *grad, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int32_t causal);
void loomrt_causal_mask_bf16(loomrt_ctx *, loomrt_buf *out, loomrt_buf *in, int64_t, int64_t, double fill);
void loomrt_embedding_bf16(loomrt_ctx *, loomrt_buf *out, loomrt_buf *table, loomrt_buf *ids, int64_t, int64_t, int64_t, int64_t vocab_group, int64_t vocab_size);
void loomrt_embedding_grad_bf16(loomrt_ctx *, loomrt_buf *out, loomrt_buf *ids, loomrt_buf *grad, int64_t, int64_t, int64_t, int64_t vocab_group);
void loomrt_embedding_grad_bf16_accumulate(loomrt_ctx *, loomrt_buf *out, loomrt_buf *ids, loomrt_buf *grad, int64_t, int64_t, int64_t, int64_t vocab_group);
void loomrt_cross_entropy_bf16(loomrt_ctx *, loomrt_buf *out, loomrt_buf *logits, loomrt_buf *labels, int64_t, int64_t, int64_t, int64_t ignore_index);
void loomrt_cross_entropy_grad_bf16(loomrt_ctx *, loomrt_buf *out, loomrt_buf *logits, loomrt_buf *labels, loomrt_buf *grad, int64_t, int64_t, int64_t, int64_t, int64_t ignore_index);
void loomrt_cross_entropy_stats_bf16(loomrt_ctx *, loomrt_buf *sum, loomrt_buf *target, loomrt_buf *logits, loomrt_buf *labels, loomrt_buf *max, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t ignore_index, int64_t vocab_group, int64_t vocab_size);
void loomrt_cross_entropy_grad_from_stats_bf16(loomrt_ctx *, loomrt_buf *out, loomrt_buf *logits, loomrt_buf *labels, loomrt_buf *grad, loomrt_buf *max, loomrt_buf *sum, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t ignore_index, int64_t vocab_group);
void loomrt_dropout_bf16(loomrt_ctx *, loomrt_buf *out, loomrt_buf *in, int64_t stream, int64_t, int64_t, int64_t global_shape, double rate, int64_t seed, int64_t shard_groups);
void loomrt_transpose_bf16(loomrt_ctx *, loomrt_buf *out, loomrt_buf *in, int64_t, int64_t, int64_t permutation);
void loomrt_slice_bf16(loomrt_ctx *, loomrt_buf *out, loomrt_buf *in, int64_t, int64_t, int64_t offsets, int64_t sizes);
void loomrt_pad_bf16(loomrt_ctx *, loomrt_buf *out, loomrt_buf *in, int64_t, int64_t, int64_t high, int64_t low);
void loomrt_sum_squares_bf16(loomrt_ctx *, loomrt_buf *out, loomrt_buf *in, int64_t, int64_t, int64_t position, int64_t count, int64_t replica_group);
/* The updates' bf16 entries read a bf16 gradient of an f32 master
 * (--grad-precision=bf16): only the gradient is widened. */
void loomrt_sgd_update_bf16(loomrt_ctx *, loomrt_buf *new_param, loomrt_buf *new_momentum, loomrt_buf *param, loomrt_buf *grad,
                            loomrt_buf *momentum, loomrt_buf *lr, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, double momentum_f,
                            double weight_decay);
void loomrt_adamw_update_bf16(loomrt_ctx *, loomrt_buf *new_param, loomrt_buf *new_m, loomrt_buf *new_v, loomrt_buf *param,
                              loomrt_buf *grad, loomrt_buf *m, loomrt_buf *v, loomrt_buf *lr, loomrt_buf *step, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                              int64_t, int64_t, int64_t, double beta1, double beta2, double eps,
                              double config_weight_decay, double weight_decay);
void loomrt_add_bf16(loomrt_ctx *, loomrt_buf *out, loomrt_buf *lhs, loomrt_buf *rhs, int64_t, int64_t, int64_t);
void loomrt_sub_bf16(loomrt_ctx *, loomrt_buf *out, loomrt_buf *lhs, loomrt_buf *rhs, int64_t, int64_t, int64_t);
void loomrt_mul_bf16(loomrt_ctx *, loomrt_buf *out, loomrt_buf *lhs, loomrt_buf *rhs, int64_t, int64_t, int64_t);
void loomrt_div_bf16(loomrt_ctx *, loomrt_buf *out, loomrt_buf *lhs, loomrt_buf *rhs, int64_t, int64_t, int64_t);
void loomrt_relu_grad_bf16(loomrt_ctx *, loomrt_buf *out, loomrt_buf *in, loomrt_buf *grad, int64_t, int64_t, int64_t);
void loomrt_gelu_grad_bf16(loomrt_ctx *, loomrt_buf *out, loomrt_buf *in, loomrt_buf *grad, int64_t, int64_t, int64_t);
void loomrt_silu_grad_bf16(loomrt_ctx *, loomrt_buf *out, loomrt_buf *in, loomrt_buf *grad, int64_t, int64_t, int64_t);
void loomrt_tanh_grad_bf16(loomrt_ctx *, loomrt_buf *out, loomrt_buf *y, loomrt_buf *grad, int64_t, int64_t, int64_t);
void loomrt_softmax_grad_bf16(loomrt_ctx *, loomrt_buf *out, loomrt_buf *y, loomrt_buf *grad, int64_t, int64_t, int64_t);
void loomrt_relu_bf16(loomrt_ctx *, loomrt_buf *out, loomrt_buf *in, int64_t, int64_t);
void loomrt_gelu_bf16(loomrt_ctx *, loomrt_buf *out, loomrt_buf *in, int64_t, int64_t);
void loomrt_silu_bf16(loomrt_ctx *, loomrt_buf *out, loomrt_buf *in, int64_t, int64_t);
void loomrt_tanh_bf16(loomrt_ctx *, loomrt_buf *out, loomrt_buf *in, int64_t, int64_t);
void loomrt_exp_bf16(loomrt_ctx *, loomrt_buf *out, loomrt_buf *in, int64_t, int64_t);
void loomrt_log_bf16(loomrt_ctx *, loomrt_buf *out, loomrt_buf *in, int64_t, int64_t);
void loomrt_sqrt_bf16(loomrt_ctx *, loomrt_buf *out, loomrt_buf *in, int64_t, int64_t);
void loomrt_rsqrt_bf16(loomrt_ctx *, loomrt_buf *out, loomrt_buf *in, int64_t, int64_t);
void loomrt_softmax_bf16(loomrt_ctx *, loomrt_buf *out, loomrt_buf *in, int64_t, int64_t);
void loomrt_sum_to_bf16(loomrt_ctx *, loomrt_buf *out, loomrt_buf *in, int64_t, int64_t);

#ifdef __cplusplus
}
#endif

#endif /* LOOMRT_LOOMRT_H */
