// A pipeline schedule in the rank program: one dist.rank_actions per
// pipeline rank, in order, each listing its actions; every stage's forward
// and backward (whole, or its input and weight parts) of every micro-batch
// runs once, on the rank that holds the stage (stage s on rank s mod P),
// in one of the schedule's slots. It round-trips; what breaks those rules
// is refused at the op that breaks them.
// RUN: loom-opt %s -split-input-file -verify-diagnostics | FileCheck %s

// CHECK-LABEL: func.func @interleaved
// CHECK:      dist.schedule slots 2 {
// CHECK-NEXT:   dist.rank_actions 0 {
// CHECK-NEXT:     dist.action forward stage 0 micro_batch 0 slot 0
// CHECK-NEXT:     dist.action forward stage 2 micro_batch 0 slot 0
// CHECK-NEXT:     dist.action backward stage 2 micro_batch 0 slot 0
// CHECK-NEXT:     dist.action backward stage 0 micro_batch 0 slot 0
// CHECK-NEXT:   }
// CHECK-NEXT:   dist.rank_actions 1 {
// CHECK:          dist.action backward_input stage 3 micro_batch 0 slot 1
// CHECK-NEXT:     dist.action backward_weight stage 3 micro_batch 0 slot 1
func.func @interleaved() {
  dist.schedule slots 2 {
    dist.rank_actions 0 {
      dist.action forward stage 0 micro_batch 0 slot 0
      dist.action forward stage 2 micro_batch 0 slot 0
      dist.action backward stage 2 micro_batch 0 slot 0
      dist.action backward stage 0 micro_batch 0 slot 0
    }
    dist.rank_actions 1 {
      dist.action forward stage 1 micro_batch 0 slot 0
      dist.action forward stage 3 micro_batch 0 slot 1
      dist.action backward_input stage 3 micro_batch 0 slot 1
      dist.action backward_weight stage 3 micro_batch 0 slot 1
      dist.action backward stage 1 micro_batch 0 slot 0
    }
  }
  return
}

// -----

func.func @no_slots() {
  // expected-error @+1 {{'dist.schedule' op keeps 0 slots; it needs at least 1}}
  dist.schedule slots 0 {
    dist.rank_actions 0 {
      dist.action forward stage 0 micro_batch 0 slot 0
      dist.action backward stage 0 micro_batch 0 slot 0
    }
  }
  return
}

// -----

func.func @ranks_out_of_order() {
  dist.schedule slots 1 {
    // expected-error @+1 {{'dist.rank_actions' op is for pipeline rank 1 where rank 0 comes next (one per rank, in order)}}
    dist.rank_actions 1 {
      dist.action forward stage 1 micro_batch 0 slot 0
      dist.action backward stage 1 micro_batch 0 slot 0
    }
  }
  return
}

// -----

func.func @stage_on_another_rank() {
  dist.schedule slots 1 {
    dist.rank_actions 0 {
      dist.action forward stage 0 micro_batch 0 slot 0
      dist.action backward stage 0 micro_batch 0 slot 0
      // expected-error @+1 {{'dist.action' op runs stage 1 on pipeline rank 0, which holds stages 0 mod 2}}
      dist.action forward stage 1 micro_batch 0 slot 0
    }
    dist.rank_actions 1 {
      dist.action backward stage 1 micro_batch 0 slot 0
    }
  }
  return
}

// -----

func.func @slot_out_of_range() {
  dist.schedule slots 1 {
    dist.rank_actions 0 {
      dist.action forward stage 0 micro_batch 0 slot 0
      dist.action forward stage 0 micro_batch 1 slot 0
      dist.action backward stage 0 micro_batch 0 slot 0
      // expected-error @+1 {{'dist.action' op uses slot 1 of a schedule of 1 slots}}
      dist.action backward stage 0 micro_batch 1 slot 1
    }
  }
  return
}

// -----

func.func @backward_missing() {
  // expected-error @+1 {{'dist.schedule' op must run stage 0's micro-batch 1 once forward and once backward (whole, or its input and weight parts once each); it runs 1 forward, 0 backward, 0 backward_input and 0 backward_weight}}
  dist.schedule slots 2 {
    dist.rank_actions 0 {
      dist.action forward stage 0 micro_batch 0 slot 0
      dist.action forward stage 0 micro_batch 1 slot 1
      dist.action backward stage 0 micro_batch 0 slot 0
    }
  }
  return
}

// -----

func.func @part_and_whole() {
  // expected-error @+1 {{'dist.schedule' op must run stage 0's micro-batch 0 once forward and once backward (whole, or its input and weight parts once each); it runs 1 forward, 1 backward, 1 backward_input and 0 backward_weight}}
  dist.schedule slots 1 {
    dist.rank_actions 0 {
      dist.action forward stage 0 micro_batch 0 slot 0
      dist.action backward_input stage 0 micro_batch 0 slot 0
      dist.action backward stage 0 micro_batch 0 slot 0
    }
  }
  return
}

// -----

func.func @not_an_action() {
  dist.schedule slots 1 {
    dist.rank_actions 0 {
      dist.action forward stage 0 micro_batch 0 slot 0
      // expected-error @+1 {{'arith.constant' op cannot stand in a 'dist.rank_actions', which holds 'dist.action's}}
      %c = arith.constant 0 : index
      dist.action backward stage 0 micro_batch 0 slot 0
    }
  }
  return
}

// -----

func.func @uneven_stages() {
  // expected-error @+1 {{'dist.schedule' op runs 3 stages on 2 ranks; each rank holds as many stages (stage s on rank s mod P)}}
  dist.schedule slots 1 {
    dist.rank_actions 0 {
      dist.action forward stage 0 micro_batch 0 slot 0
      dist.action backward stage 0 micro_batch 0 slot 0
      dist.action forward stage 2 micro_batch 0 slot 0
      dist.action backward stage 2 micro_batch 0 slot 0
    }
    dist.rank_actions 1 {
      dist.action forward stage 1 micro_batch 0 slot 0
      dist.action backward stage 1 micro_batch 0 slot 0
    }
  }
  return
}

// -----

// A micro-batch no action names is missing too.
func.func @micro_batch_missing() {
  // expected-error @+1 {{'dist.schedule' op must run stage 0's micro-batch 1 once forward and once backward (whole, or its input and weight parts once each); it runs 0 forward, 0 backward, 0 backward_input and 0 backward_weight}}
  dist.schedule slots 2 {
    dist.rank_actions 0 {
      dist.action forward stage 0 micro_batch 0 slot 0
      dist.action forward stage 0 micro_batch 2 slot 1
      dist.action backward stage 0 micro_batch 0 slot 0
      dist.action backward stage 0 micro_batch 2 slot 1
    }
  }
  return
}

// -----

// Numbers far beyond any schedule are refused before anything is counted
// (loom-fuzz found the verifier sizing a table by them).
func.func @huge_micro_batch() {
  dist.schedule slots 1 {
    dist.rank_actions 0 {
      dist.action forward stage 0 micro_batch 0 slot 0
      // expected-error @+1 {{'dist.action' op names stage 0 and micro-batch 99999999999; each must lie in [0, 2^31)}}
      dist.action backward stage 0 micro_batch 99999999999 slot 0
    }
  }
  return
}
