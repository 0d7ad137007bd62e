// Lab 5 (pipeline), stage C: the executor. See executor.h for the model, the ops and why each rank has a
// communication thread that follows one global message order.
#include "labs/pipeline/executor.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "reference/base/status.h"
#include "reference/comm/comm.h"
#include "reference/nn/layers.h"
#include "reference/tensor/tensor.h"

namespace distlab::pipeline {

absl::StatusOr<std::vector<Message>> MessageOrder(const Schedule& sc, const Costs& costs) {
  ASSIGN_OR_RETURN(SimResult sim, Simulate(sc, costs));
  const int p = sc.p, n_virtual = sc.p * sc.v;
  struct Timed {
    double t;
    Message msg;
  };
  std::vector<Timed> all;
  for (int s = 0; s < p; ++s) {
    for (const TimedOp& t : sim.timeline[s]) {
      // The neighbour is a virtual stage: chunk c of rank s is k = c p + s, its next is k+1 on rank
      // (k+1) % p.
      const int k = VirtualStage(s, t.op.chunk, p);
      const bool input_grad = t.op.kind == OpKind::kBackward || t.op.kind == OpKind::kFullBackward;
      int to = -1;
      if (t.op.kind == OpKind::kForward && k + 1 < n_virtual) to = (k + 1) % p;
      if (input_grad && k > 0) to = (k - 1) % p;
      // A chunk feeding a chunk on the same rank (p = 1) hands the tensor over without a message.
      if (to >= 0 && to != s)
        all.push_back({t.end, {s, to, t.op.kind == OpKind::kForward, t.op.mb, t.op.chunk}});
    }
  }
  // The simulated time is causal: a message is sent after everything its op needed has arrived, so both
  // ends of every message see it in the same position relative to all their other messages.
  std::stable_sort(all.begin(), all.end(), [](const Timed& a, const Timed& b) {
    return std::tie(a.t, a.msg.from, a.msg.to) < std::tie(b.t, b.msg.from, b.msg.to);
  });
  std::vector<Message> out;
  out.reserve(all.size());
  for (const Timed& t : all) out.push_back(t.msg);
  return out;
}

namespace {

using Clock = std::chrono::steady_clock;

// Buffers handed between a rank's compute thread and its communication thread, keyed by message.
class Mailbox {
 public:
  using Key = std::tuple<bool, int, int>;  // (activation?, microbatch, chunk)
  void Put(Key key, std::vector<float> data) {
    std::lock_guard<std::mutex> lock(mu_);
    box_[key] = std::move(data);
    cv_.notify_all();
  }
  // Waits for `key` (or a failure) up to `timeout`.
  absl::StatusOr<std::vector<float>> Take(Key key, std::chrono::milliseconds timeout,
                                          const std::string& what) {
    std::unique_lock<std::mutex> lock(mu_);
    const bool ready = cv_.wait_for(lock, timeout, [&] { return box_.count(key) > 0 || !failed_.ok(); });
    if (!failed_.ok()) return failed_;
    if (!ready) {
      return absl::DeadlineExceededError(
          absl::StrCat(what, " did not arrive within ", timeout.count(),
                       " ms: the ranks wait on each other (check the message order)"));
    }
    std::vector<float> out = std::move(box_[key]);
    box_.erase(key);
    return out;
  }
  void Fail(const absl::Status& st) {
    std::lock_guard<std::mutex> lock(mu_);
    if (failed_.ok()) failed_ = st;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<Key, std::vector<float>> box_;
  absl::Status failed_;
};

// One block of the model on the course's layers (reference/nn), and what each microbatch in flight keeps.
// The layers cache only their latest input, and a pipeline stage has several microbatches in flight, so the
// block keeps x and z per microbatch itself and uses the layers' cache-free backward halves.
struct Block {
  nn::Linear linear;
  nn::Gelu gelu;
  std::map<int, tensor::Tensor> x, z, g;  // per microbatch: input, pre-activation, dL/dz

  Block(int virtual_stage, const PipelineProblem& pr)
      : linear(absl::StrCat("block", virtual_stage), pr.hidden, pr.hidden, /*bias=*/true, /*seed=*/0) {
    const std::vector<float>& w = pr.weight[virtual_stage];
    const std::vector<float>& b = pr.bias[virtual_stage];
    std::copy(w.begin(), w.end(), linear.weight().value.f32());
    std::copy(b.begin(), b.end(), linear.bias()->value.f32());
  }
  // F: z = x W^T + b, returns y = GELU(z).
  tensor::Tensor Forward(int mb, tensor::Tensor in) {
    tensor::Tensor zz = linear.Forward(in);
    tensor::Tensor y = gelu.Forward(zz);
    linear.ClearCache();  // this block keeps x and z per microbatch instead
    gelu.ClearCache();
    x[mb] = std::move(in);
    z[mb] = std::move(zz);
    return y;
  }
  // B: g = dy * GELU'(z), returns dx = g W. z is no longer needed; g is kept for W.
  tensor::Tensor InputGrad(int mb, const tensor::Tensor& dy) {
    tensor::Tensor gg = nn::Gelu::BackwardAt(z.at(mb), dy);
    tensor::Tensor dx = linear.BackwardInput(gg);
    z.erase(mb);
    g[mb] = std::move(gg);
    return dx;
  }
  // W: dW += g^T x, db += sum over rows of g. Accumulates: the step's gradient is the sum over microbatches.
  void WeightGrad(int mb) {
    linear.BackwardWeight(x.at(mb), g.at(mb));
    g.erase(mb);
    x.erase(mb);
  }
};

absl::Status CheckProblem(const Schedule& sc, const PipelineProblem& pr) {
  if (pr.p != sc.p || pr.m != sc.m || pr.v != sc.v) {
    return absl::InvalidArgumentError(absl::StrCat("the problem has p = ", pr.p, ", m = ", pr.m,
                                                   ", v = ", pr.v, " but the schedule has p = ", sc.p,
                                                   ", m = ", sc.m, ", v = ", sc.v));
  }
  if (pr.hidden < 1 || pr.rows < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("hidden = ", pr.hidden, ", rows = ", pr.rows, "; both must be >= 1"));
  }
  const size_t hh = static_cast<size_t>(pr.hidden) * pr.hidden, rh = static_cast<size_t>(pr.rows) * pr.hidden;
  const size_t blocks = static_cast<size_t>(pr.p) * pr.v;
  if (pr.weight.size() != blocks || pr.bias.size() != blocks ||
      pr.input.size() != static_cast<size_t>(pr.m) || pr.target.size() != static_cast<size_t>(pr.m)) {
    return absl::InvalidArgumentError("problem: need p v weights and biases, m inputs and targets");
  }
  for (size_t k = 0; k < blocks; ++k) {
    if (pr.weight[k].size() != hh || pr.bias[k].size() != static_cast<size_t>(pr.hidden)) {
      return absl::InvalidArgumentError(
          absl::StrCat("problem: block ", k, "'s weight or bias has the wrong size"));
    }
  }
  for (int i = 0; i < pr.m; ++i) {
    if (pr.input[i].size() != rh || pr.target[i].size() != rh) {
      return absl::InvalidArgumentError(absl::StrCat("problem: microbatch ", i, " has ", pr.input[i].size(),
                                                     " inputs / ", pr.target[i].size(),
                                                     " targets; need rows*h = ", rh));
    }
  }
  return absl::OkStatus();
}

// Keeps an op busy until `cost_ms` after `start` (sleep or spin), so runs can be compared with the simulator.
void PadTo(Clock::time_point start, double cost_ms, bool spin) {
  if (cost_ms <= 0) return;
  const auto until =
      start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double, std::milli>(cost_ms));
  if (spin) {
    while (Clock::now() < until) {
    }
  } else {
    std::this_thread::sleep_until(until);
  }
}

// What the ranks of one step share: its inputs, the global message order, and the result they fill in (each
// rank writes only its own entries).
struct Step {
  const Schedule& sc;
  const PipelineProblem& pr;
  const ExecutorOptions& opt;
  const std::vector<Message>& order;
  size_t n;  // floats per message: rows * h
  Clock::time_point t0;
  ExecResult& res;
  std::vector<double>& losses;  // per rank; only the last virtual stage's rank adds to its entry

  int VirtualStages() const { return sc.p * sc.v; }
  double MsSinceStart(Clock::time_point t) const {
    return std::chrono::duration<double, std::milli>(t - t0).count();
  }
};

const char* What(bool activation) { return activation ? "activation" : "gradient"; }

// The communication thread of rank s: its messages, in the global order, one blocking Send or Recv each. A
// Send takes its buffer from `outbox` (the compute thread puts it there when the op ends); a Recv puts what
// arrived into `inbox`, keyed by the receiving chunk. The first error fails `inbox` so the compute thread
// stops waiting.
absl::Status CommLoop(const Step& step, int s, comm::Comm& comm, comm::Stream& stream, Mailbox& inbox,
                      Mailbox& outbox) {
  const int p = step.sc.p;
  for (const Message& msg : step.order) {
    if (msg.from != s && msg.to != s) continue;
    absl::Status st;
    if (msg.from == s) {
      auto buf = outbox.Take(
          {msg.activation, msg.mb, msg.chunk}, step.opt.timeout,
          absl::StrCat("rank ", s, ": its own ", What(msg.activation), " of microbatch ", msg.mb));
      st = buf.status();
      if (st.ok()) st = comm.Send(buf->data(), step.n, comm::DataType::kF32, msg.to, stream);
      if (st.ok()) st = stream.Synchronize();  // the buffer must outlive the transfer
    } else {
      std::vector<float> buf(step.n);
      st = comm.Recv(buf.data(), step.n, comm::DataType::kF32, msg.from, stream);
      if (st.ok()) st = stream.Synchronize();
      const int to_virtual = VirtualStage(msg.from, msg.chunk, p) + (msg.activation ? 1 : -1);
      if (st.ok()) inbox.Put({msg.activation, msg.mb, to_virtual / p}, std::move(buf));
    }
    if (!st.ok()) {
      inbox.Fail(st);
      return st;
    }
  }
  return absl::OkStatus();
}

// What op `op` of rank s consumes (waiting for it is idle time, not part of the op): F of virtual stage 0
// reads its microbatch of the input, a later F the activation from stage k-1; B (or a full B) of the last
// virtual stage reads the loss gradient its F left, an earlier one the gradient from stage k+1. W reads
// nothing (the block kept what it needs).
absl::StatusOr<std::vector<float>> OpInput(const Step& step, int s, const Op& op, Mailbox& inbox,
                                           std::map<int, std::vector<float>>& loss_grad) {
  const int p = step.sc.p, k = VirtualStage(s, op.chunk, p);
  if (op.kind == OpKind::kForward) {
    if (k == 0) return step.pr.input[op.mb];
    return inbox.Take(
        {true, op.mb, op.chunk}, step.opt.timeout,
        absl::StrCat("rank ", s, ": activation of microbatch ", op.mb, " from stage ", (k - 1) % p));
  }
  if (op.kind == OpKind::kWeight) return std::vector<float>();
  if (k + 1 < step.VirtualStages()) {
    return inbox.Take(
        {false, op.mb, op.chunk}, step.opt.timeout,
        absl::StrCat("rank ", s, ": gradient of microbatch ", op.mb, " from stage ", (k + 1) % p));
  }
  std::vector<float> in = std::move(loss_grad[op.mb]);
  loss_grad.erase(op.mb);
  return in;
}

// What an op produces: the tensor it sends (to virtual stage `to`; -1 for none) and its artificial cost.
struct OpOutput {
  std::vector<float> data;
  int to = -1;
  double cost_ms = 0;
};

std::vector<float> AsVector(const tensor::Tensor& t) {
  return std::vector<float>(t.f32(), t.f32() + t.numel());
}

// Runs op `op` of rank s on `block`. The last virtual stage's F also computes the loss
// 1/(2 R m) sum |y - t|^2 (into step.losses[s]) and keeps dL/dy = (y - t) / (R m) for its B.
OpOutput Compute(const Step& step, int s, const Op& op, Block& block, std::vector<float> in,
                 std::map<int, std::vector<float>>& loss_grad) {
  const int k = VirtualStage(s, op.chunk, step.sc.p), rows = step.pr.rows, m = step.sc.m;
  const auto as_tensor = [&](const std::vector<float>& data) {
    return tensor::Tensor::FromVector({rows, step.pr.hidden}, data);
  };
  OpOutput out;
  switch (op.kind) {
    case OpKind::kForward: {
      const tensor::Tensor y = block.Forward(op.mb, as_tensor(in));
      out.cost_ms = step.opt.forward_ms;
      if (k + 1 < step.VirtualStages()) {
        out.data = AsVector(y);
        out.to = k + 1;
        break;
      }
      const std::vector<float>& t = step.pr.target[op.mb];
      const float* py = y.f32();
      const float inv = 1.f / static_cast<float>(rows * m);
      std::vector<float> dy(step.n);
      for (size_t e = 0; e < step.n; ++e) {
        const float d = py[e] - t[e];
        step.losses[s] += 0.5 * d * d / (rows * m);
        dy[e] = d * inv;
      }
      loss_grad[op.mb] = std::move(dy);
      break;
    }
    case OpKind::kBackward:
    case OpKind::kFullBackward: {
      const tensor::Tensor dx = block.InputGrad(op.mb, as_tensor(in));
      if (k > 0) {
        out.data = AsVector(dx);
        out.to = k - 1;
      }
      out.cost_ms = step.opt.backward_ms;
      if (op.kind == OpKind::kFullBackward) {
        block.WeightGrad(op.mb);
        out.cost_ms += step.opt.weight_ms;
      }
      break;
    }
    case OpKind::kWeight:
      block.WeightGrad(op.mb);
      out.cost_ms = step.opt.weight_ms;
      break;
  }
  return out;
}

// Rank s's part of the step: its blocks (chunk c is virtual stage c p + s), its ops in schedule order on this
// thread, its messages on a communication thread. On an error the rank fails its outbox (which stops its
// communication thread) and aborts its communicator (which stops every peer blocked on it).
absl::Status RunRank(const Step& step, int s, comm::Comm& comm, comm::Stream& stream) {
  const int p = step.sc.p, v = step.sc.v;
  // Mailboxes are keyed by (activation?, microbatch, chunk): the outbox by the sending chunk, the inbox by
  // the receiving one.
  Mailbox inbox, outbox;
  absl::Status comm_status;
  std::thread comm_thread([&] { comm_status = CommLoop(step, s, comm, stream, inbox, outbox); });
  const auto fail = [&](absl::Status st) {
    outbox.Fail(st);
    comm.Abort().IgnoreError();
    comm_thread.join();
    return st;
  };
  std::vector<std::unique_ptr<Block>> blocks;
  for (int c = 0; c < v; ++c) blocks.push_back(std::make_unique<Block>(VirtualStage(s, c, p), step.pr));
  std::map<int, std::vector<float>> loss_grad;  // last block: dL/dy per microbatch
  for (const Op& op : step.sc.stages[s]) {
    absl::StatusOr<std::vector<float>> in = OpInput(step, s, op, inbox, loss_grad);
    if (!in.ok()) return fail(in.status());
    const Clock::time_point start = Clock::now();
    OpOutput out = Compute(step, s, op, *blocks[op.chunk], std::move(*in), loss_grad);
    // The output leaves when the op ends, artificial cost included, as in the simulator.
    PadTo(start, out.cost_ms, step.opt.spin);
    const Clock::time_point end = Clock::now();
    if (out.to >= 0) {
      const bool activation = op.kind == OpKind::kForward;
      if (out.to % p == s) {
        inbox.Put({activation, op.mb, out.to / p}, std::move(out.data));  // a chunk of this rank: no message
      } else {
        outbox.Put({activation, op.mb, op.chunk}, std::move(out.data));
      }
    }
    step.res.timeline[s].push_back({op, step.MsSinceStart(start), step.MsSinceStart(end)});
  }
  comm_thread.join();
  RETURN_IF_ERROR(comm_status);
  for (int c = 0; c < v; ++c) {
    const int k = VirtualStage(s, c, p);
    step.res.weight_grad[k] = AsVector(blocks[c]->linear.weight().grad);
    step.res.bias_grad[k] = AsVector(blocks[c]->linear.bias()->grad);
  }
  return absl::OkStatus();
}

// Times from the first op's start (rank start-up is not part of the step), the makespan and the bubble rate
// 1 - (busy time / p) / makespan.
void Summarize(int p, ExecResult& res) {
  double busy_sum = 0;
  for (int s = 0; s < p; ++s) {
    for (const TimedOp& t : res.timeline[s]) {
      res.makespan_ms = std::max(res.makespan_ms, t.end);
      busy_sum += t.end - t.start;
    }
  }
  double first = res.makespan_ms;
  for (int s = 0; s < p; ++s) {
    if (!res.timeline[s].empty()) first = std::min(first, res.timeline[s].front().start);
  }
  for (auto& row : res.timeline) {
    for (TimedOp& t : row) t.start -= first, t.end -= first;
  }
  res.makespan_ms -= first;
  res.bubble_rate = res.makespan_ms > 0 ? 1.0 - (busy_sum / p) / res.makespan_ms : 0.0;
}

}  // namespace

absl::StatusOr<ExecResult> RunPipeline(const Schedule& sc, const PipelineProblem& pr,
                                       const ExecutorOptions& opt) {
  RETURN_IF_ERROR(ValidateSchedule(sc));
  RETURN_IF_ERROR(CheckProblem(sc, pr));
  const int p = sc.p, n_virtual = p * sc.v;
  // The global message order, simulated with the artificial costs (unit costs when there are none).
  const Costs costs{opt.forward_ms > 0 ? opt.forward_ms : 1, opt.backward_ms > 0 ? opt.backward_ms : 1,
                    opt.weight_ms > 0 ? opt.weight_ms : 1, 0};
  ASSIGN_OR_RETURN(const std::vector<Message> order, MessageOrder(sc, costs));

  ExecResult res;
  res.weight_grad.assign(n_virtual, {});
  res.bias_grad.assign(n_virtual, {});
  res.timeline.assign(p, {});
  std::vector<double> losses(p, 0.0);
  const Step step{sc, pr, opt, order, static_cast<size_t>(pr.rows) * pr.hidden, Clock::now(), res, losses};
  comm::CommOptions copt;
  copt.name = "pipeline";
  copt.timeout = opt.timeout;
  RETURN_IF_ERROR(comm::FirstError(comm::RunRanks(
      p, [&](int s, comm::Comm& comm, comm::Stream& stream) { return RunRank(step, s, comm, stream); },
      copt)));
  res.loss = losses[p - 1];
  Summarize(p, res);
  return res;
}

}  // namespace distlab::pipeline
