func.func @f(%a: !monarch.mesh<x = 6>) {
  %m = monarch.spawn_procs : !monarch.mesh<host = 4, gpu = 6>
  %v = monarch.split %m (host -> [dp, pp], gpu -> [tp], pp = 2) : !monarch.mesh<host = 4, gpu = 6>
  %s = monarch.slice %v (pp = 1, tp = 0:4:2) : !monarch.mesh<dp = 2, pp = 2, tp = 6>
  %r = monarch.rename %s (dp -> d) : !monarch.mesh<dp = 2, tp = 2>
  %f = monarch.flatten %m -> all : !monarch.mesh<host = 4, gpu = 6>
  %w = monarch.view %a offset 1 (p = 2:3) : !monarch.mesh<x = 6>
  return
}
