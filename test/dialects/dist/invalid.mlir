// RUN: loom-opt %s -split-input-file -verify-diagnostics

train.model @m attributes {dist.mesh = #dist.mesh<["dp" = 2]>} {
  %x = train.input "x" : tensor<8xf32>
  // expected-error @below {{names mesh axis "tp", which the mesh #dist.mesh<["dp" = 2]> does not have}}
  %a = dist.all_reduce %x over ["tp"] : tensor<8xf32>
  %l = train.reduce sum %a dims [0] : tensor<8xf32>
  train.output loss(%l : tensor<f32>)
}

// -----

train.model @m attributes {dist.mesh = #dist.mesh<["dp" = 2]>} {
  %x = train.input "x" : tensor<8xf32>
  // expected-error @below {{names mesh axis "dp" twice}}
  %a = dist.all_reduce %x over ["dp", "dp"] : tensor<8xf32>
  %l = train.reduce sum %a dims [0] : tensor<8xf32>
  train.output loss(%l : tensor<f32>)
}

// -----

train.model @m {
  %x = train.input "x" : tensor<8xf32>
  // expected-error @below {{is not inside a model with a 'dist.mesh'}}
  %a = dist.all_reduce %x over ["dp"] : tensor<8xf32>
  %l = train.reduce sum %a dims [0] : tensor<8xf32>
  train.output loss(%l : tensor<f32>)
}

// -----

train.model @m attributes {dist.mesh = #dist.mesh<["dp" = 2]>} {
  %x = train.input "x" : tensor<8x4xf32>
  // expected-error @below {{result 'tensor<8x4xf32>' must be the group's blocks gathered along the dimension of 'tensor<8x4xf32>' (dimension 0 of size 16)}}
  %a = dist.all_gather %x over ["dp"] dim 0 : tensor<8x4xf32> -> tensor<8x4xf32>
  %l = train.reduce sum %a dims [0, 1] : tensor<8x4xf32>
  train.output loss(%l : tensor<f32>)
}

// -----

train.model @m attributes {dist.mesh = #dist.mesh<["dp" = 4]>} {
  %x = train.input "x" : tensor<6x4xf32>
  // expected-error @below {{dimension 0 of 'tensor<6x4xf32>' does not divide into 4 shards}}
  %a = dist.shard %x axes [["dp"], [] ] : tensor<6x4xf32> -> tensor<1x4xf32>
  %l = train.reduce sum %a dims [0, 1] : tensor<1x4xf32>
  train.output loss(%l : tensor<f32>)
}

// -----

train.model @m attributes {dist.mesh = #dist.mesh<["dp" = 2]>} {
  %x = train.input "x" : tensor<8xf32>
  // expected-error @below {{pair (0, 1) repeats a source or a target}}
  %a = dist.collective_permute %x over ["dp"] pairs [0, 1, 0, 1] : tensor<8xf32>
  %l = train.reduce sum %a dims [0] : tensor<8xf32>
  train.output loss(%l : tensor<f32>)
}

// -----

train.model @m attributes {dist.mesh = #dist.mesh<["dp" = 2]>} {
  // expected-error @below {{mesh axis "dp" is used twice in one sharding}}
  %x = train.input "x" {dist.sharding = [#dist.sharding<[{"dp"}, {"dp"} ]>]} : tensor<8x4xf32>
  %l = train.reduce sum %x dims [0, 1] : tensor<8x4xf32>
  train.output loss(%l : tensor<f32>)
}

// -----

// expected-error @below {{mesh axis "dp" appears twice}}
train.model @m attributes {dist.mesh = #dist.mesh<["dp" = 2, "dp" = 2]>} {
  %x = train.input "x" : tensor<8xf32>
  %l = train.reduce sum %x dims [0] : tensor<8xf32>
  train.output loss(%l : tensor<f32>)
}

// -----

train.model @m attributes {dist.mesh = #dist.mesh<["dp" = 2]>} {
  %x = train.input "x" : tensor<8xf32>
  %y = train.input "y" : tensor<4xf32>
  // expected-error @below {{results must have one use, the one dist.wait that ends the collective}}
  %s:2 = dist.all_reduce_start %x, %y over ["dp"] : tensor<8xf32>, tensor<4xf32>
  %a = dist.wait %s#0 : tensor<8xf32>
  %l = train.reduce sum %a dims [0] : tensor<8xf32>
  train.output loss(%l : tensor<f32>)
}

// -----

train.model @m attributes {dist.mesh = #dist.mesh<["pp" = 2]>} {
  %x = train.input "x" : tensor<8xf32>
  // expected-error @below {{'dist.send' op peer 2 is outside axis "pp" of size 2}}
  dist.send %x to "pp" = 2 : tensor<8xf32>
  %l = train.reduce sum %x dims [0] : tensor<8xf32>
  train.output loss(%l : tensor<f32>)
}

// -----

train.model @m attributes {dist.mesh = #dist.mesh<["pp" = 2]>} {
  // expected-error @below {{'dist.recv' op names mesh axis "dp", which the mesh #dist.mesh<["pp" = 2]> does not have}}
  %x = dist.recv from "dp" = 0 : tensor<8xf32>
  %l = train.reduce sum %x dims [0] : tensor<8xf32>
  train.output loss(%l : tensor<f32>)
}

// -----

train.model @m attributes {dist.mesh = #dist.mesh<["pp" = 2]>} {
  %x = train.input "x" : tensor<8xf32>
  // expected-error @below {{'dist.send' op runs on pp = 1 and names that rank as its peer}}
  dist.send %x to "pp" = 1 {dist.on = {pp = 1}} : tensor<8xf32>
  %l = train.reduce sum %x dims [0] : tensor<8xf32>
  train.output loss(%l : tensor<f32>)
}

// -----

// An all-reduce among members is an exchange between two coordinates of
// one axis.
train.model @m attributes {dist.mesh = #dist.mesh<["pp" = 4]>} {
  %x = train.input "x" : tensor<8xf32>
  // expected-error @below {{exchanges between two ascending coordinates; got [3, 0]}}
  %a = dist.all_reduce %x over ["pp"] members [3, 0] : tensor<8xf32>
  %l = train.reduce sum %a dims [0] : tensor<8xf32>
  train.output loss(%l : tensor<f32>)
}

// -----

train.model @m attributes {dist.mesh = #dist.mesh<["pp" = 4]>} {
  %x = train.input "x" : tensor<8xf32>
  // expected-error @below {{exchanges between two ascending coordinates; got [0, 1, 3]}}
  %a = dist.all_reduce %x over ["pp"] members [0, 1, 3] : tensor<8xf32>
  %l = train.reduce sum %a dims [0] : tensor<8xf32>
  train.output loss(%l : tensor<f32>)
}

// -----

train.model @m attributes {dist.mesh = #dist.mesh<["pp" = 4]>} {
  %x = train.input "x" : tensor<8xf32>
  // expected-error @below {{names member 4 of axis "pp" of size 4}}
  %a = dist.all_reduce %x over ["pp"] members [0, 4] : tensor<8xf32>
  %l = train.reduce sum %a dims [0] : tensor<8xf32>
  train.output loss(%l : tensor<f32>)
}

// -----

train.model @m attributes {dist.mesh = #dist.mesh<["pp" = 4, "dp" = 2]>} {
  %x = train.input "x" : tensor<8xf32>
  // expected-error @below {{sums among members of one axis only}}
  %a = dist.all_reduce %x over ["pp", "dp"] members [0, 3] : tensor<8xf32>
  %l = train.reduce sum %a dims [0] : tensor<8xf32>
  train.output loss(%l : tensor<f32>)
}

// -----

train.model @m attributes {dist.mesh = #dist.mesh<["dp" = 2]>} {
  %x = train.input "x" : tensor<2x4xf32>
  %c = arith.constant 0 : index
  // expected-error @below {{result 'tensor<4xf32>' must be the group's blocks gathered along the dimension of 'tensor<4xf32>' (dimension 0 of size 8)}}
  %s = dist.all_gather_start %x at %c over ["dp"] dim 0 : tensor<2x4xf32> -> tensor<4xf32>
  %g = dist.wait %s : tensor<4xf32>
  %l = train.reduce sum %g dims [0] : tensor<4xf32>
  train.output loss(%l : tensor<f32>)
}

// -----

train.model @m attributes {dist.mesh = #dist.mesh<["dp" = 2]>} {
  %x = train.input "x" : tensor<4xf32>
  // expected-error @below {{result must have one use, the one dist.wait that ends the collective}}
  %s = dist.all_gather_start %x over ["dp"] dim 0 : tensor<4xf32> -> tensor<8xf32>
  %l = train.reduce sum %s dims [0] : tensor<8xf32>
  train.output loss(%l : tensor<f32>)
}

// -----

train.model @m attributes {dist.mesh = #dist.mesh<["dp" = 2]>} {
  %x = train.input "x" : tensor<3x4xf32>
  %y = train.input "y" : tensor<2x4xf32>
  %h = train.repeat 2 carry(%y : tensor<2x4xf32>) invariant(%x : tensor<3x4xf32>) : (tensor<2x4xf32>) {
  ^bb0(%i: index, %c: tensor<2x4xf32>, %w: tensor<3x4xf32>):
    %two = arith.constant 2 : index
    %j = arith.muli %i, %two : index
    // expected-error @below {{slice index must be a constant or the enclosing loop's iteration plus a constant}}
    %s = dist.all_gather_start %w at %j over ["dp"] dim 0 : tensor<3x4xf32> -> tensor<8xf32>
    %g = dist.wait %s : tensor<8xf32>
    train.yield carry(%c : tensor<2x4xf32>)
  }
  %l = train.reduce sum %h dims [0, 1] : tensor<2x4xf32>
  train.output loss(%l : tensor<f32>)
}

// -----

// A reduction yielded from a loop must be waited for after the loop.
train.model @m attributes {dist.mesh = #dist.mesh<["dp" = 2]>} {
  %x = train.input "x" : tensor<2x4xf32>
  %y = train.input "y" : tensor<4xf32>
  %h, %s = train.repeat 2 carry(%y : tensor<4xf32>) stacked(%x : tensor<2x4xf32>) : (tensor<4xf32>) stacked(tensor<2x4xf32>) {
  ^bb0(%i: index, %c: tensor<4xf32>, %xi: tensor<4xf32>):
    // expected-error @below {{results must have one use, the one dist.wait that ends the collective (or the loop's yield, waited after the loop)}}
    %r = dist.all_reduce_start %xi over ["dp"] : tensor<4xf32>
    train.yield carry(%c : tensor<4xf32>) stacked(%r : tensor<4xf32>)
  }
  %l = train.reduce sum %s dims [0, 1] : tensor<2x4xf32>
  train.output loss(%l : tensor<f32>)
}

// -----

// A deferred wait names the loop's stacked results, not a carry.
train.model @m attributes {dist.mesh = #dist.mesh<["dp" = 2]>} {
  %y = train.input "y" : tensor<4xf32>
  %h = train.repeat 2 carry(%y : tensor<4xf32>) : (tensor<4xf32>) {
  ^bb0(%i: index, %c: tensor<4xf32>):
    %r = dist.all_reduce_start %c over ["dp"] : tensor<4xf32>
    train.yield carry(%r : tensor<4xf32>)
  }
  // expected-error @below {{waits after a loop for all the results of one all-reduce started in its body, in order, each yielded as a stacked slice}}
  %w = dist.wait %h : tensor<4xf32>
  %l = train.reduce sum %w dims [0] : tensor<4xf32>
  train.output loss(%l : tensor<f32>)
}

// -----

// The padding of a block of a dimension of 7 over tp = 2: blocks of 4.
train.model @m attributes {dist.mesh = #dist.mesh<["tp" = 2]>} {
  %x = train.input "x" : tensor<3x8xf32>
  // expected-error @below {{a dimension of 7 split over ["tp"] (2 ranks) has blocks of 4, not 3}}
  %f = dist.fill_padding %x over ["tp"] dim 0 size 7 value 0.0 : tensor<3x8xf32>
  %l = train.reduce sum %f dims [0, 1] : tensor<3x8xf32>
  train.output loss(%l : tensor<f32>)
}

// -----

train.model @m attributes {dist.mesh = #dist.mesh<["tp" = 2]>} {
  %x = train.input "x" : tensor<4x8xf32>
  // expected-error @below {{dimension 2 is outside 'tensor<4x8xf32>'}}
  %f = dist.fill_padding %x over ["tp"] dim 2 size 7 value 0.0 : tensor<4x8xf32>
  %l = train.reduce sum %f dims [0, 1] : tensor<4x8xf32>
  train.output loss(%l : tensor<f32>)
}
