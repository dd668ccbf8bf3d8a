// Text that only looks like a dense array of index elements: in a comment
// (array<index: 1>), a string and another attribute's name; and the dense
// arrays MLIR supports.
func.func @f() attributes {s = "array<index: 1>", my_array = array<i64: 1, 2>,
                           b = array<i1: true>, f = array<f32: 1.0>} {
  return
}
