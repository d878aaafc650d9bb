// RUN: monarch-opt %s --split-input-file --monarch-print-mesh-layout --verify-diagnostics

// The worked example of DESIGN.md §6.1: host=60, gpu=24 split with pp=4.
func.func @split_example() {
  // expected-remark @+1 {{mesh layout: root #0, offset=0 host=60:24 gpu=24:1}}
  %m = monarch.spawn_procs : !monarch.mesh<host = 60, gpu = 24>
  // expected-remark @+1 {{mesh layout: root #0, offset=0 dp=15:96 pp=4:24 tp=24:1}}
  %v = monarch.split %m (host -> [dp, pp], gpu -> [tp], pp = 4) : !monarch.mesh<host = 60, gpu = 24>
  // expected-remark @+1 {{mesh layout: root #0, offset=24 dp=15:96 tp=24:1}}
  %s = monarch.slice %v (pp = 1) : !monarch.mesh<dp = 15, pp = 4, tp = 24>
  return
}

// -----

func.func @slices() {
  // expected-remark @+1 {{mesh layout: root #0, offset=0 host=4:8 gpu=8:1}}
  %m = monarch.spawn_procs : !monarch.mesh<host = 4, gpu = 8>
  // expected-remark @+1 {{mesh layout: root #0, offset=8 host=2:8 gpu=4:2}}
  %a = monarch.slice %m (host = 1:3, gpu = ::2) : !monarch.mesh<host = 4, gpu = 8>
  // expected-remark @+1 {{mesh layout: root #0, offset=30 gpu=1:1}}
  %b = monarch.slice %m (host = -1, gpu = 6:7) : !monarch.mesh<host = 4, gpu = 8>
  // expected-remark @+1 {{mesh layout: root #0, offset=8 h=2:8 x=4:2}}
  %c = monarch.rename %a (host -> h, gpu -> x) : !monarch.mesh<host = 2, gpu = 4>
  %d = monarch.slice %c (h = 0) : !monarch.mesh<h = 2, x = 4>
  // expected-remark @-1 {{mesh layout: root #0, offset=8 x=4:2}}
  return
}

// -----

// Flatten of a dense view; rename of a flattened one.
func.func @flatten() {
  // expected-remark @+1 {{mesh layout: root #0, offset=0 host=2:4 gpu=4:1}}
  %m = monarch.spawn_procs : !monarch.mesh<host = 2, gpu = 4>
  // expected-remark @+1 {{mesh layout: root #0, offset=4 gpu=4:1}}
  %h = monarch.slice %m (host = 1) : !monarch.mesh<host = 2, gpu = 4>
  // expected-remark @+1 {{mesh layout: root #0, offset=4 all=4:1}}
  %f = monarch.flatten %h -> all : !monarch.mesh<gpu = 4>
  return
}

// -----

// Views of a block argument resolve against it; a monarch.view restarts from
// its explicit layout; a second spawn is a second root.
func.func @roots(%arg: !monarch.mesh<x = 6>) {
  // expected-remark @+1 {{mesh layout: root #0, offset=3 x=3:1}}
  %s = monarch.slice %arg (x = 3:) : !monarch.mesh<x = 6>
  // expected-remark @+1 {{mesh layout: root #0, offset=1 a=2:3 b=1:1}}
  %v = monarch.view %arg offset 1 (a = 2:3, b = 1:1) : !monarch.mesh<x = 6>
  // expected-remark @+1 {{mesh layout: root #1, offset=0 gpu=2:1}}
  %m = monarch.spawn_procs : !monarch.mesh<gpu = 2>
  return
}
