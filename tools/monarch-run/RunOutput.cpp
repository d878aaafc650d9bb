#include "RunOutput.h"

#include "monarch/tensor/Plan.h"
#include "monarch/tensor/TensorFormat.h"

#include <algorithm>
#include <fstream>
#include <set>

namespace monarch::run {

std::string coordsOf(const plan::Program &program, int64_t rank) {
  std::vector<std::string> parts;
  int64_t rest = rank;
  for (int i = program.root_size() - 1; i >= 0; --i) {
    int64_t size = std::max<int64_t>(program.root(i).size(), 1);
    parts.push_back(program.root(i).name() + "=" + std::to_string(rest % size));
    rest /= size;
  }
  std::string text;
  for (auto it = parts.rbegin(); it != parts.rend(); ++it)
    text += (text.empty() ? "" : ", ") + *it;
  return text;
}

std::string describeFailure(const plan::Failure &f) {
  std::string text = "instruction #" + std::to_string(f.instruction());
  if (!f.location().empty())
    text += " (at " + f.location() + ")";
  return text + " failed on rank " + std::to_string(f.rank()) + ": " +
         f.message();
}

FetchPrinter::FetchPrinter(const plan::Program &program, std::FILE *out)
    : program(program), out(out) {
  std::unordered_map<int64_t, std::vector<int64_t>> meshRanks;
  auto addMesh = [&](const plan::Mesh &m) {
    if (auto view = tensor::meshViewOf(m); view.ok())
      meshRanks[m.id()] = view->ranks();
  };
  plan::Mesh root;
  root.set_id(0);
  int64_t stride = 1;
  for (int i = program.root_size() - 1; i >= 0; --i) {
    auto *d = root.add_dims();
    d->set_name(program.root(i).name());
    d->set_size(program.root(i).size());
    d->set_stride(stride);
    stride *= program.root(i).size();
  }
  std::reverse(root.mutable_dims()->begin(), root.mutable_dims()->end());
  addMesh(root);
  for (const auto &m : program.meshes())
    addMesh(m);
  for (const auto &inst : program.instructions()) {
    if (inst.has_create_mesh())
      addMesh(inst.create_mesh().mesh());
    if (!inst.has_fetch())
      continue;
    auto it = meshRanks.find(inst.mesh());
    if (it == meshRanks.end())
      continue;
    indexOf[inst.id()] = order.size();
    order.push_back(Pending{inst.id(), it->second, {}});
  }
}

void FetchPrinter::print(const plan::FetchReply &r) {
  std::string where = "fetch #" + std::to_string(r.instruction()) + " rank " +
                      std::to_string(r.rank()) + " (" +
                      coordsOf(program, r.rank()) + "): ";
  if (r.has_error()) {
    ++failedCount;
    std::fprintf(out, "%serror: %s\n", where.c_str(),
                 describeFailure(r.error()).c_str());
  } else {
    std::fprintf(out, "%s%s\n", where.c_str(),
                 tensor::formatTensor(r.value()).c_str());
  }
  std::fflush(out);
}

void FetchPrinter::add(const plan::FetchReply &reply) {
  auto it = indexOf.find(reply.instruction());
  if (it == indexOf.end()) {
    print(reply);
    return;
  }
  order[it->second].got[reply.rank()] = reply;
  drain();
}

void FetchPrinter::drain() {
  while (next < order.size() &&
         order[next].got.size() >= order[next].ranks.size()) {
    for (const auto &[rank, reply] : order[next].got)
      print(reply);
    ++next;
  }
}

void FetchPrinter::flush() {
  for (; next < order.size(); ++next) {
    const auto &p = order[next];
    for (int64_t rank : p.ranks) {
      auto got = p.got.find(rank);
      if (got != p.got.end()) {
        print(got->second);
        continue;
      }
      ++failedCount;
      std::fprintf(out,
                   "fetch #%lld rank %lld (%s): error: no reply (the run "
                   "ended first)\n",
                   static_cast<long long>(p.id), static_cast<long long>(rank),
                   coordsOf(program, rank).c_str());
    }
  }
  std::fflush(out);
}

namespace {
std::string jsonString(const std::string &s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\')
      out += '\\', out += c;
    else if (static_cast<unsigned char>(c) < 0x20)
      out += ' ';
    else
      out += c;
  }
  return out + "\"";
}
} // namespace

bool writeChromeTrace(const std::string &path, const plan::Program &program,
                      const tensor::PlanRunResult &result) {
  std::ofstream os(path, std::ios::trunc);
  if (!os)
    return false;
  int64_t origin = INT64_MAX;
  for (const auto &t : result.trace)
    origin = std::min(origin, t.start_ns());
  std::unordered_map<int64_t, std::string> streamNames{{0, "default"}};
  for (const auto &s : program.streams())
    streamNames[s.id()] = s.name();
  for (const auto &inst : program.instructions())
    if (inst.has_create_stream())
      streamNames[inst.create_stream().stream().id()] =
          inst.create_stream().stream().name();

  os << "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n";
  bool first = true;
  auto emit = [&](const std::string &event) {
    os << (first ? "" : ",\n") << event;
    first = false;
  };
  std::set<std::pair<int64_t, int64_t>> tracks;
  for (size_t i = 0; i < result.trace.size(); ++i) {
    const auto &t = result.trace[i];
    int64_t rank = result.traceRanks[i];
    int64_t tid = t.on_device() ? kDeviceTrackBase + t.stream() : t.stream();
    tracks.insert({rank, tid});
    char times[96];
    std::snprintf(times, sizeof(times), "\"ts\":%.3f,\"dur\":%.3f",
                  (t.start_ns() - origin) / 1e3,
                  (t.end_ns() - t.start_ns()) / 1e3);
    std::string args = "{\"instruction\":" + std::to_string(t.instruction());
    if (t.recording())
      args += ",\"recording\":" + std::to_string(t.recording());
    const char *clock = t.on_device() ? "gpu" : "host";
    args += ",\"stream\":" + std::to_string(t.stream()) + ",\"clock\":\"" +
            clock + "\"}";
    emit("{\"name\":" + jsonString(t.name()) + ",\"cat\":\"" + clock +
         "\",\"ph\":\"X\",\"pid\":" + std::to_string(rank) + ",\"tid\":" +
         std::to_string(tid) + "," + times + ",\"args\":" + args + "}");
  }
  std::set<int64_t> ranks;
  for (const auto &[rank, tid] : tracks) {
    if (ranks.insert(rank).second)
      emit("{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":" +
           std::to_string(rank) + ",\"args\":{\"name\":" +
           jsonString("rank " + std::to_string(rank) + " (" +
                      coordsOf(program, rank) + ")") +
           "}}");
    bool onDevice = tid >= kDeviceTrackBase;
    int64_t stream = onDevice ? tid - kDeviceTrackBase : tid;
    auto name = streamNames.count(stream) ? streamNames[stream]
                                          : "stream " + std::to_string(stream);
    if (onDevice)
      name += " (gpu)";
    emit("{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":" +
         std::to_string(rank) + ",\"tid\":" + std::to_string(tid) +
         ",\"args\":{\"name\":" + jsonString(name) + "}}");
  }
  os << "\n]}\n";
  return static_cast<bool>(os);
}

} // namespace monarch::run
