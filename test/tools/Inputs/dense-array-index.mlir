// A dense array of index elements: MLIR 22's parser crashes on it.
func.func @f() attributes {a = array<index: 1>} {
  return
}
