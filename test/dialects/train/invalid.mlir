// RUN: loom-opt %s -split-input-file -verify-diagnostics

// Every op rejects what breaks its rules, with a message naming the op, the
// operand and the rule.

func.func @matmul_contracting(%a: tensor<2x3xf32>, %b: tensor<4x5xf32>) {
  // expected-error @+1 {{'train.matmul' contracting dimension of lhs (3) does not match that of rhs (4)}}
  %0 = train.matmul %a, %b : tensor<2x3xf32>, tensor<4x5xf32>
  return
}

// -----

func.func @matmul_rank(%a: tensor<3xf32>, %b: tensor<3x5xf32>) {
  // expected-error @+1 {{'train.matmul' operands must have rank >= 2}}
  %0 = train.matmul %a, %b : tensor<3xf32>, tensor<3x5xf32>
  return
}

// -----

func.func @matmul_batch(%a: tensor<2x2x3xf32>, %b: tensor<4x3x5xf32>) {
  // expected-error @+1 {{'train.matmul' rhs 'tensor<4x3x5xf32>' must be rank 2 or have the batch dimensions of lhs}}
  %0 = train.matmul %a, %b : tensor<2x2x3xf32>, tensor<4x3x5xf32>
  return
}

// -----

func.func @add_shapes(%a: tensor<2x3xf32>, %b: tensor<2xf32>) {
  // expected-error @+1 {{'train.add' operand shapes 'tensor<2x3xf32>' and 'tensor<2xf32>' are not broadcast-compatible}}
  %0 = train.add %a, %b : tensor<2x3xf32>, tensor<2xf32>
  return
}

// -----

func.func @mul_types(%a: tensor<2xf32>, %b: tensor<2xbf16>) {
  // expected-error @+1 {{'train.mul' operands must have one element type, got 'f32' and 'bf16'}}
  %0 = train.mul %a, %b : tensor<2xf32>, tensor<2xbf16>
  return
}

// -----

func.func @relu_int(%a: tensor<2xi32>) {
  // expected-error @+1 {{'train.relu' op operand #0 must be ranked tensor of 32-bit float or bfloat16 type values}}
  %0 = train.relu %a : tensor<2xi32>
  return
}

// -----

func.func @reduce_range(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{'train.reduce' reduced dimension 2 is out of range for rank 2}}
  %0 = train.reduce sum %a dims [2] : tensor<2x3xf32>
  return
}

// -----

func.func @reduce_repeat(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{'train.reduce' reduced dimension 1 is repeated}}
  %0 = train.reduce max %a dims [1, 1] : tensor<2x3xf32>
  return
}

// -----

func.func @broadcast_size(%a: tensor<3xf32>) {
  // expected-error @+1 {{'train.broadcast' op input dimension 0 (3) must equal result dimension 1 (4)}}
  %0 = train.broadcast %a dims [1] : tensor<3xf32> -> tensor<2x4xf32>
  return
}

// -----

func.func @sum_to_shape(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{'train.sum_to' op result dimension 0 (2) must be 1 or equal input dimension 1 (3)}}
  %0 = train.sum_to %a : tensor<2x3xf32> -> tensor<2xf32>
  return
}

// -----

func.func @softmax_rank(%a: tensor<f32>) {
  // expected-error @+1 {{'train.softmax' op input must have rank >= 1}}
  %0 = train.softmax %a : tensor<f32>
  return
}

// -----

func.func @layer_norm_gamma(%x: tensor<2x8xf32>, %g: tensor<4xf32>) {
  // expected-error @+1 {{'train.layer_norm' gamma 'tensor<4xf32>' must be a vector of the input's last dimension (8)}}
  %0 = train.layer_norm %x, %g, %g : tensor<2x8xf32>, tensor<4xf32>
  return
}

// -----

func.func @rms_norm_type(%x: tensor<2x8xf32>, %g: tensor<8xbf16>) {
  // expected-error @+1 {{'train.rms_norm' gamma must have the input's element type}}
  %0 = train.rms_norm %x, %g : tensor<2x8xf32>, tensor<8xbf16>
  return
}

// -----

func.func @attention_rank(%q: tensor<2x4x8xf32>) {
  // expected-error @+1 {{'train.attention' q, k and v must be [batch, heads, seq, head_dim], got 'tensor<2x4x8xf32>'}}
  %0 = train.attention %q, %q, %q causal : tensor<2x4x8xf32>
  return
}

// -----

func.func @embedding_table(%t: tensor<16xf32>, %ids: tensor<4xi32>) {
  // expected-error @+1 {{'train.embedding' table must be [vocab, dim], got 'tensor<16xf32>'}}
  %0 = train.embedding %t, %ids : tensor<16xf32>, tensor<4xi32>
  return
}

// -----

func.func @embedding_grad_shape(%ids: tensor<4xi32>, %g: tensor<4x3xf32>) {
  // expected-error @+1 {{'train.embedding_grad' op grad 'tensor<4x3xf32>' must be ids' shape followed by 8}}
  %0 = train.embedding_grad %ids, %g : tensor<4xi32>, tensor<4x3xf32> -> tensor<16x8xf32>
  return
}

// -----

func.func @cross_entropy_labels(%l: tensor<4x10xf32>, %y: tensor<5xi32>) {
  // expected-error @+1 {{'train.cross_entropy' labels 'tensor<5xi32>' must have the shape of logits 'tensor<4x10xf32>' without its last (class) dimension}}
  %0 = train.cross_entropy %l, %y : tensor<4x10xf32>, tensor<5xi32>
  return
}

// -----

func.func @cross_entropy_stats_shape(%l: tensor<4x10xf32>, %y: tensor<4xi32>, %m: tensor<5xf32>) {
  // expected-error @+1 {{'train.cross_entropy_stats' op statistics 'tensor<5xf32>' must have the labels' shape 'tensor<4xi32>'}}
  %s, %t = train.cross_entropy_stats %l, %y, %m : tensor<4x10xf32>, tensor<4xi32> -> tensor<5xf32>
  return
}

// -----

func.func @cross_entropy_from_stats_shape(%m: tensor<4xf32>, %y: tensor<2x2xi32>) {
  // expected-error @+1 {{'train.cross_entropy_from_stats' op statistics 'tensor<4xf32>' must have the labels' shape 'tensor<2x2xi32>'}}
  %0 = train.cross_entropy_from_stats %m, %m, %m, %y : tensor<4xf32>, tensor<2x2xi32> -> tensor<f32>
  return
}

// -----

func.func @cross_entropy_grad_from_stats_labels(%l: tensor<4x10xf32>, %y: tensor<5xi32>, %g: tensor<f32>, %m: tensor<5xf32>) {
  // expected-error @+1 {{'train.cross_entropy_grad_from_stats' labels 'tensor<5xi32>' must have the shape of logits 'tensor<4x10xf32>' without its last (class) dimension}}
  %0 = train.cross_entropy_grad_from_stats %l, %y, %g, %m, %m : tensor<4x10xf32>, tensor<5xi32>, tensor<5xf32>
  return
}

// -----

func.func @cross_entropy_float_labels(%l: tensor<4x10xf32>, %y: tensor<4xf32>) {
  // expected-error @+1 {{'train.cross_entropy' op operand #1 must be ranked tensor of 32-bit signless integer or 64-bit signless integer values}}
  %0 = train.cross_entropy %l, %y : tensor<4x10xf32>, tensor<4xf32>
  return
}

// -----

func.func @dropout_rate(%x: tensor<4xf32>) {
  // expected-error @+1 {{'train.dropout' op rate must lie in [0, 1), got 1.000000e+00}}
  %0 = train.dropout %x rate 1.0 seed 0 : tensor<4xf32>
  return
}

// -----

func.func @reshape_count(%x: tensor<4x4xf32>) {
  // expected-error @+1 {{'train.reshape' op cannot reshape 'tensor<4x4xf32>' (16 elements) to 'tensor<15xf32>' (15 elements)}}
  %0 = train.reshape %x : tensor<4x4xf32> -> tensor<15xf32>
  return
}

// -----

func.func @transpose_perm(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'train.transpose' permutation dimension 0 is repeated}}
  %0 = train.transpose %x [0, 0] : tensor<2x3xf32>
  return
}

// -----

func.func @slice_box(%x: tensor<4x4xf32>) {
  // expected-error @+1 {{'train.slice' the box at offset 2 of size 4 in dimension 1 is not a non-empty part of [0, 4)}}
  %0 = train.slice %x offsets [0, 2] sizes [4, 4] : tensor<4x4xf32>
  return
}

// -----

func.func @pad_negative(%x: tensor<4xf32>) {
  // expected-error @+1 {{'train.pad' padding must be non-negative}}
  %0 = train.pad %x low [-1] high [0] : tensor<4xf32>
  return
}

// -----

func.func @concat_shapes(%a: tensor<2x3xf32>, %b: tensor<3x3xf32>) {
  // expected-error @+1 {{'train.concat' input #1 'tensor<3x3xf32>' differs from input #0 outside the concatenated axis}}
  %0 = train.concat %a, %b axis 1 : tensor<2x3xf32>, tensor<3x3xf32>
  return
}

// -----

func.func @convert_int(%x: tensor<4xf32>) {
  // expected-error @+1 {{'train.convert' converts to f32 or bf16, not 'f16'}}
  %0 = train.convert %x to f16 : tensor<4xf32>
  return
}

// -----

// A target that is not a float type: inference ran before the verifier and
// cast it to FloatType unchecked (an abort in the parser).
func.func @convert_to_i32(%x: tensor<4xf32>) {
  // expected-error @+1 {{'train.convert' converts to f32 or bf16, not 'i32'}}
  %0 = train.convert %x to i32 : tensor<4xf32>
  return
}

// -----

// A target that is not a float type: inference ran before the verifier and
// cast it to FloatType unchecked (an abort in the parser).
func.func @convert_to_index(%x: tensor<4xf32>) {
  // expected-error @+1 {{'train.convert' converts to f32 or bf16, not 'index'}}
  %0 = train.convert %x to index : tensor<4xf32>
  return
}

// -----

// A target that is not a float type: inference ran before the verifier and
// cast it to FloatType unchecked (an abort in the parser).
func.func @convert_to_none(%x: tensor<4xf32>) {
  // expected-error @+1 {{'train.convert' converts to f32 or bf16, not 'none'}}
  %0 = train.convert %x to none : tensor<4xf32>
  return
}

// -----

// A target that is not a float type: inference ran before the verifier and
// cast it to FloatType unchecked (an abort in the parser).
func.func @convert_to_complex_f32(%x: tensor<4xf32>) {
  // expected-error @+1 {{'train.convert' converts to f32 or bf16, not 'complex<f32>'}}
  %0 = train.convert %x to complex<f32> : tensor<4xf32>
  return
}

// -----

// A target that is not a float type: inference ran before the verifier and
// cast it to FloatType unchecked (an abort in the parser).
func.func @convert_to_vector_2xf32(%x: tensor<4xf32>) {
  // expected-error @+1 {{'train.convert' converts to f32 or bf16, not 'vector<2xf32>'}}
  %0 = train.convert %x to vector<2xf32> : tensor<4xf32>
  return
}

// -----

// A target that is not a float type: inference ran before the verifier and
// cast it to FloatType unchecked (an abort in the parser).
func.func @convert_to_tensor_2xf32(%x: tensor<4xf32>) {
  // expected-error @+1 {{'train.convert' converts to f32 or bf16, not 'tensor<2xf32>'}}
  %0 = train.convert %x to tensor<2xf32> : tensor<4xf32>
  return
}

// -----

func.func @clip_max(%n: tensor<f32>) {
  // expected-error @+1 {{'train.clip_factor' op max norm must be positive, got 0.000000e+00}}
  %0 = train.clip_factor %n max 0.0
  return
}

// -----

func.func @sum_squares_empty() {
  // expected-error @+1 {{'train.sum_squares' op needs at least one input}}
  %0 = "train.sum_squares"() : () -> tensor<f32>
  return
}

// -----

func.func @sum_squares_group(%x: tensor<4xf32>) {
  // expected-error @+1 {{'train.sum_squares' op replica group must be a group mask of at most 32 axes, got -1}}
  %0 = train.sum_squares %x replicated over -1 : tensor<4xf32>
  return
}

// -----

func.func @sgd_momentum_type(%p: tensor<4xf32>, %m: tensor<8xf32>, %lr: tensor<f32>) {
  // expected-error @+1 {{'train.sgd_update' momentum buffer 'tensor<8xf32>' must have the parameter's type 'tensor<4xf32>'}}
  %0, %1 = train.sgd_update #train.sgd<momentum = 0.9> %p, %p momentum(%m : tensor<8xf32>) lr(%lr) : tensor<4xf32>
  return
}

// -----

// expected-error @+1 {{#train.init<normal> needs a positive scale, got 0}}
func.func @init_scale() attributes {init = #train.init<normal>} {
  return
}

// -----

// expected-error @+1 {{#train.schedule: cosine decay needs total (0) greater than warmup (5)}}
func.func @schedule_total() attributes {s = #train.schedule<lr = 0.1, warmup = 5, decay = cosine>} {
  return
}

// -----

// expected-error @+1 {{#train.adamw: beta1 and beta2 must lie in [0, 1), got 1.000000e+00 and 9.990000e-01}}
func.func @adamw_beta() attributes {o = #train.adamw<beta1 = 1.0>} {
  return
}

// -----

// expected-error @+1 {{#train.sgd: momentum must lie in [0, 1), got 1.5}}
func.func @sgd_momentum() attributes {o = #train.sgd<momentum = 1.5>} {
  return
}

// -----

train.model @duplicate_names {
  // expected-note @+1 {{first declared here}}
  %w = train.param "w" init(#train.init<zeros>) : tensor<4xf32>
  // expected-error @+1 {{'train.input' op name "w" is already declared}}
  %x = train.input "w" : tensor<4xf32>
  %l = train.reduce sum %w dims [0] : tensor<4xf32>
  train.output loss(%l : tensor<f32>)
}

// -----

// expected-error @+1 {{'train.model' op body must end with 'train.output'}}
train.model @no_output {
  %w = train.param "w" init(#train.init<zeros>) : tensor<4xf32>
}

// -----

train.model @grad_count {
  %w = train.param "w" init(#train.init<zeros>) : tensor<4xf32>
  %v = train.param "v" init(#train.init<zeros>) : tensor<4xf32>
  %l = train.reduce sum %w dims [0] : tensor<4xf32>
  // expected-error @+1 {{'train.output' op has 1 gradients but the model has 2 parameters}}
  train.output loss(%l : tensor<f32>) grads(%w : tensor<4xf32>)
}

// -----

func.func @param_outside() {
  // expected-error @+1 {{'train.param' op expects parent op 'train.model'}}
  %w = train.param "w" init(#train.init<zeros>) : tensor<4xf32>
  return
}

// -----

func.func @repeat_leading(%x: tensor<2x4xf32>, %w: tensor<2x4x4xf32>) {
  // expected-error @+1 {{'train.repeat' op stacked operand #0 of type 'tensor<2x4x4xf32>' must have a leading dimension of 3 (the repeat count)}}
  %h = train.repeat 3 carry(%x : tensor<2x4xf32>) stacked(%w : tensor<2x4x4xf32>) : (tensor<2x4xf32>) {
  ^bb0(%i: index, %c: tensor<2x4xf32>, %wi: tensor<4x4xf32>):
    train.yield carry(%c : tensor<2x4xf32>)
  }
  return
}

// -----

func.func @repeat_args(%x: tensor<2x4xf32>) {
  // expected-error @+1 {{'train.repeat' op body argument #1 has type 'tensor<4x2xf32>', expected 'tensor<2x4xf32>'}}
  %h = train.repeat 3 carry(%x : tensor<2x4xf32>) : (tensor<2x4xf32>) {
  ^bb0(%i: index, %c: tensor<4x2xf32>):
    train.yield carry(%x : tensor<2x4xf32>)
  }
  return
}

// -----

func.func @repeat_residuals(%x: tensor<2x4xf32>) {
  // expected-error @+1 {{'train.repeat' op has 2 residuals and 1 saved carries but 2 stacked results}}
  %h, %s:2 = train.repeat 3 saving_carries residuals(2) carry(%x : tensor<2x4xf32>) : (tensor<2x4xf32>) stacked(tensor<3x2x4xf32>, tensor<3x2x4xf32>) {
  ^bb0(%i: index, %c: tensor<2x4xf32>):
    train.yield carry(%c : tensor<2x4xf32>) stacked(%c, %c : tensor<2x4xf32>, tensor<2x4xf32>)
  }
  return
}

// -----

func.func @repeat_yield(%x: tensor<2x4xf32>, %y: tensor<4xf32>) {
  %h = train.repeat 3 carry(%x : tensor<2x4xf32>) : (tensor<2x4xf32>) {
  ^bb0(%i: index, %c: tensor<2x4xf32>):
    %z = train.reduce sum %c dims [0] : tensor<2x4xf32>
    // expected-error @+1 {{'train.yield' op carries must have the types of the enclosing 'train.repeat' carries}}
    train.yield carry(%z : tensor<4xf32>)
  }
  return
}

// -----

func.func @repeat_count(%x: tensor<2x4xf32>) {
  // expected-error @+1 {{'train.repeat' op attribute 'count' failed to satisfy constraint: 64-bit signless integer attribute whose value is positive}}
  %h = train.repeat 0 carry(%x : tensor<2x4xf32>) : (tensor<2x4xf32>) {
  ^bb0(%i: index, %c: tensor<2x4xf32>):
    train.yield carry(%c : tensor<2x4xf32>)
  }
  return
}

// -----

train.model @update_count attributes {optimizer = #train.sgd<>, schedule = #train.schedule<lr = 0.1>} {
  %w = train.param "w" init(#train.init<zeros>) : tensor<4xf32>
  %m = train.state "w.m" of "w" : tensor<4xf32>
  %l = train.reduce sum %w dims [0] : tensor<4xf32>
  // expected-error @+1 {{'train.output' op has 1 updates but the model carries 2 values (parameters and optimizer state)}}
  train.output loss(%l : tensor<f32>) updates(%w : tensor<4xf32>)
}

// -----

train.model @grad_type {
  %w = train.param "w" init(#train.init<zeros>) : tensor<4xf32>
  %l = train.reduce sum %w dims [0] : tensor<4xf32>
  %g = arith.constant dense<0.0> : tensor<5xf32>
  // expected-error @+1 {{'train.output' op gradient of "w" has type 'tensor<5xf32>', expected 'tensor<4xf32>'}}
  train.output loss(%l : tensor<f32>) grads(%g : tensor<5xf32>)
}

// -----

func.func @state_outside() {
  // expected-error @+1 {{'train.state' op expects parent op 'train.model'}}
  %m = train.state "m" of "w" : tensor<4xf32>
  return
}

// -----

func.func @iteration_outside() {
  // expected-error @+1 {{'train.iteration' op expects parent op 'train.model'}}
  %i = train.iteration : tensor<f32>
  return
}

// -----

func.func @yield_outside(%x: tensor<4xf32>) {
  // expected-error @+1 {{'train.yield' op expects parent op 'train.repeat'}}
  train.yield carry(%x : tensor<4xf32>)
  return
}

// -----

func.func @scale_int(%x: tensor<4xi32>) {
  // expected-error @+1 {{'train.scale' op operand #0 must be ranked tensor of 32-bit float or bfloat16 type values}}
  %0 = train.scale %x by 2.0 : tensor<4xi32>
  return
}

// -----

func.func @adamw_types(%p: tensor<4xf32>, %g: tensor<8xf32>, %lr: tensor<f32>) {
  // expected-error @+1 {{'train.adamw_update' op failed to verify that all of {param, grad} have same shape}}
  %0:3 = "train.adamw_update"(%p, %g, %p, %p, %lr, %lr) {config = #train.adamw<>, weight_decay = 0.0 : f64} : (tensor<4xf32>, tensor<8xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

func.func @adamw_state_types(%p: tensor<4xf32>, %m: tensor<4xbf16>, %lr: tensor<f32>) {
  // expected-error @+1 {{'train.adamw_update' op failed to verify that all of {param, m, v, new_param, new_m, new_v} have same type}}
  %0:3 = "train.adamw_update"(%p, %p, %m, %p, %lr, %lr) {config = #train.adamw<>, weight_decay = 0.0 : f64} : (tensor<4xf32>, tensor<4xf32>, tensor<4xbf16>, tensor<4xf32>, tensor<f32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

// A gradient is the parameter's type, or bf16 for an f32 master: not an
// f32 gradient of a bf16 parameter.
func.func @adamw_grad_type(%p: tensor<4xbf16>, %g: tensor<4xf32>, %lr: tensor<f32>) {
  // expected-error @+1 {{'train.adamw_update' op gradient of element type 'f32' for a parameter of 'bf16': expected the parameter's, or bf16 for an f32 master}}
  %0:3 = train.adamw_update #train.adamw<> %p, %g, %p, %p lr(%lr) step(%lr) decay 0.0 : tensor<4xbf16>, tensor<4xf32>
  return
}

// -----

func.func @sgd_grad_type(%p: tensor<4xbf16>, %g: tensor<4xf32>, %lr: tensor<f32>) {
  // expected-error @+1 {{'train.sgd_update' op gradient of element type 'f32' for a parameter of 'bf16'}}
  %0 = train.sgd_update #train.sgd<> %p, %g lr(%lr) : tensor<4xbf16>, tensor<4xf32>
  return
}

// -----

func.func @adamw_lr_shape(%p: tensor<4xf32>, %lr: tensor<2xf32>) {
  // expected-error @+1 {{'train.adamw_update' op operand #4 must be 0D tensor of 32-bit float values}}
  %0:3 = "train.adamw_update"(%p, %p, %p, %p, %lr, %lr) {config = #train.adamw<>, weight_decay = 0.0 : f64} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<2xf32>, tensor<2xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

func.func @reduce_max_grad_shape(%x: tensor<2x3xf32>, %m: tensor<3xf32>) {
  // expected-error @+1 {{'train.reduce_max_grad' op max 'tensor<3xf32>' must have the input's reduced shape}}
  %0 = train.reduce_max_grad %x, %m, %m dims [1] : tensor<2x3xf32>, tensor<3xf32>
  return
}

// -----

func.func @softmax_grad_types(%y: tensor<2x3xf32>, %g: tensor<3x2xf32>) {
  // expected-error @+1 {{'train.softmax_grad' op failed to verify that all of {output, grad, result} have same type}}
  %0 = "train.softmax_grad"(%y, %g) : (tensor<2x3xf32>, tensor<3x2xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @attention_grad_rank(%q: tensor<4x8xf32>) {
  // expected-error @+1 {{'train.attention_grad' q, k and v must be [batch, heads, seq, head_dim], got 'tensor<4x8xf32>'}}
  %0:3 = train.attention_grad %q, %q, %q, %q : tensor<4x8xf32>
  return
}

// -----

func.func @layer_norm_grad_gamma(%x: tensor<2x8xf32>, %g: tensor<2x8xf32>) {
  // expected-error @+1 {{'train.layer_norm_grad' gamma 'tensor<2x8xf32>' must be a vector of the input's last dimension (8)}}
  %0:3 = train.layer_norm_grad %x, %g, %x : tensor<2x8xf32>, tensor<2x8xf32>
  return
}

// -----

func.func @rms_norm_grad_gamma(%x: tensor<2x8xf32>, %g: tensor<4xf32>) {
  // expected-error @+1 {{'train.rms_norm_grad' gamma 'tensor<4xf32>' must be a vector of the input's last dimension (8)}}
  %0:2 = train.rms_norm_grad %x, %g, %x : tensor<2x8xf32>, tensor<4xf32>
  return
}

// -----

func.func @cross_entropy_grad_labels(%l: tensor<4x10xf32>, %y: tensor<4x10xi32>, %g: tensor<f32>) {
  // expected-error @+1 {{'train.cross_entropy_grad' labels 'tensor<4x10xi32>' must have the shape of logits 'tensor<4x10xf32>' without its last (class) dimension}}
  %0 = train.cross_entropy_grad %l, %y, %g : tensor<4x10xf32>, tensor<4x10xi32>
  return
}

// -----

func.func @embedding_grad_rank(%ids: tensor<4xi32>, %g: tensor<4x8xf32>) {
  // expected-error @+1 {{'train.embedding_grad' op result must be [vocab, dim], got 'tensor<16x8x1xf32>'}}
  %0 = train.embedding_grad %ids, %g : tensor<4xi32>, tensor<4x8xf32> -> tensor<16x8x1xf32>
  return
}

// -----

func.func @concat_axis(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{'train.concat' axis 2 is out of range for rank 2}}
  %0 = train.concat %a, %a axis 2 : tensor<2x3xf32>, tensor<2x3xf32>
  return
}

// -----

func.func @lr_schedule_min(%t: tensor<f32>) {
  // expected-error @+1 {{#train.schedule: min_lr must lie in [0, lr], got 2}}
  %0 = train.lr_schedule #train.schedule<lr = 1.0, min_lr = 2.0> at %t
  return
}

// -----

func.func @broadcast_order(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{'train.broadcast' op dims must be increasing result dimensions, got 0 at position 1}}
  %0 = train.broadcast %a dims [1, 0] : tensor<2x3xf32> -> tensor<3x2x3xf32>
  return
}

// -----

func.func @causal_mask_rank(%x: tensor<4xf32>) {
  // expected-error @+1 {{'train.causal_mask' op input must have rank >= 2 (queries, keys last)}}
  %0 = train.causal_mask %x fill 0.0 : tensor<4xf32>
  return
}

// -----

func.func @reduce_kind(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{custom op 'train.reduce' expected sum, mean or max, got 'avg'}}
  %0 = train.reduce avg %a dims [1] : tensor<2x3xf32>
  return
}
