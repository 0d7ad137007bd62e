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
      // The neighbour is a virtual stage: chunk c of rank s is k = c p + s, its next is k+1 on rank (k+1) %
      // p.
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

}  // namespace

absl::StatusOr<ExecResult> RunPipeline(const Schedule& sc, const PipelineProblem& pr,
                                       const ExecutorOptions& opt) {
  RETURN_IF_ERROR(ValidateSchedule(sc));
  RETURN_IF_ERROR(CheckProblem(sc, pr));
  const int p = sc.p, m = sc.m, v = sc.v, n_virtual = p * v, h = pr.hidden, rows = pr.rows;
  const size_t n = static_cast<size_t>(rows) * h;  // floats per message
  // The global message order, simulated with the artificial costs (unit costs when there are none).
  const Costs costs{opt.forward_ms > 0 ? opt.forward_ms : 1, opt.backward_ms > 0 ? opt.backward_ms : 1,
                    opt.weight_ms > 0 ? opt.weight_ms : 1, 0};
  ASSIGN_OR_RETURN(const std::vector<Message> order, MessageOrder(sc, costs));

  ExecResult res;
  res.weight_grad.assign(n_virtual, {});
  res.bias_grad.assign(n_virtual, {});
  res.timeline.assign(p, {});
  std::vector<double> losses(p, 0.0);
  const Clock::time_point t0 = Clock::now();
  auto ms_since_t0 = [&](Clock::time_point t) {
    return std::chrono::duration<double, std::milli>(t - t0).count();
  };
  auto what = [](bool activation) { return activation ? "activation" : "gradient"; };

  comm::CommOptions copt;
  copt.name = "pipeline";
  copt.timeout = opt.timeout;
  std::vector<absl::Status> statuses = comm::RunRanks(
      p,
      [&](int s, comm::Comm& comm, comm::Stream& stream) -> absl::Status {
        // Mailboxes are keyed by (activation?, microbatch, chunk): the outbox by the sending chunk, the inbox
        // by the receiving one.
        Mailbox inbox, outbox;
        // The communication thread: this rank's messages, in the global order, one blocking Send/Recv each.
        absl::Status comm_status;
        std::thread comm_thread([&] {
          for (const Message& msg : order) {
            if (msg.from != s && msg.to != s) continue;
            absl::Status st;
            if (msg.from == s) {
              auto buf = outbox.Take(
                  {msg.activation, msg.mb, msg.chunk}, opt.timeout,
                  absl::StrCat("rank ", s, ": its own ", what(msg.activation), " of microbatch ", msg.mb));
              st = buf.status();
              if (st.ok()) st = comm.Send(buf->data(), n, comm::DataType::kF32, msg.to, stream);
              if (st.ok()) st = stream.Synchronize();  // the buffer must outlive the transfer
            } else {
              std::vector<float> buf(n);
              st = comm.Recv(buf.data(), n, comm::DataType::kF32, msg.from, stream);
              if (st.ok()) st = stream.Synchronize();
              const int to_virtual = VirtualStage(msg.from, msg.chunk, p) + (msg.activation ? 1 : -1);
              if (st.ok()) inbox.Put({msg.activation, msg.mb, to_virtual / p}, std::move(buf));
            }
            if (!st.ok()) {
              comm_status = st;
              inbox.Fail(st);
              return;
            }
          }
        });
        auto fail = [&](absl::Status st) {
          outbox.Fail(st);             // unblock the communication thread
          comm.Abort().IgnoreError();  // and every peer blocked on this rank
          comm_thread.join();
          return st;
        };

        // This rank's blocks: chunk c is virtual stage c p + s.
        std::vector<std::unique_ptr<Block>> blocks;
        for (int c = 0; c < v; ++c) blocks.push_back(std::make_unique<Block>(VirtualStage(s, c, p), pr));
        std::map<int, std::vector<float>> loss_grad;  // last block: dL/dy per microbatch
        const float inv = 1.f / static_cast<float>(rows * m);
        auto as_tensor = [&](const std::vector<float>& data) {
          return tensor::Tensor::FromVector({rows, h}, data);
        };
        auto as_vector = [](const tensor::Tensor& t) {
          return std::vector<float>(t.f32(), t.f32() + t.numel());
        };
        for (const Op& op : sc.stages[s]) {
          const int k = VirtualStage(s, op.chunk, p);
          Block& block = *blocks[op.chunk];
          // Inputs first (not part of the op's time: waiting is idle time).
          std::vector<float> in;
          if (op.kind == OpKind::kForward && k > 0) {
            auto got = inbox.Take(
                {true, op.mb, op.chunk}, opt.timeout,
                absl::StrCat("rank ", s, ": activation of microbatch ", op.mb, " from stage ", (k - 1) % p));
            if (!got.ok()) return fail(got.status());
            in = std::move(*got);
          } else if (op.kind == OpKind::kForward) {
            in = pr.input[op.mb];
          }
          const bool input_grad = op.kind == OpKind::kBackward || op.kind == OpKind::kFullBackward;
          if (input_grad && k + 1 < n_virtual) {
            auto got = inbox.Take(
                {false, op.mb, op.chunk}, opt.timeout,
                absl::StrCat("rank ", s, ": gradient of microbatch ", op.mb, " from stage ", (k + 1) % p));
            if (!got.ok()) return fail(got.status());
            in = std::move(*got);
          } else if (input_grad) {
            in = std::move(loss_grad[op.mb]);
            loss_grad.erase(op.mb);
          }
          const Clock::time_point start = Clock::now();
          double cost_ms = 0;
          std::vector<float> out;  // what this op sends, if anything
          int out_to = -1;         // the virtual stage it goes to
          switch (op.kind) {
            case OpKind::kForward: {
              const tensor::Tensor y = block.Forward(op.mb, as_tensor(in));
              if (k + 1 < n_virtual) {
                out = as_vector(y);
                out_to = k + 1;
              } else {  // the loss: 1/(2 R m) sum |y - t|^2, dL/dy = (y - t) / (R m)
                const std::vector<float>& t = pr.target[op.mb];
                const float* py = y.f32();
                std::vector<float> dy(n);
                for (size_t e = 0; e < n; ++e) {
                  const float d = py[e] - t[e];
                  losses[s] += 0.5 * d * d / (rows * m);
                  dy[e] = d * inv;
                }
                loss_grad[op.mb] = std::move(dy);
              }
              cost_ms = opt.forward_ms;
              break;
            }
            case OpKind::kBackward:
            case OpKind::kFullBackward: {
              const tensor::Tensor dx = block.InputGrad(op.mb, as_tensor(in));
              if (k > 0) {
                out = as_vector(dx);
                out_to = k - 1;
              }
              cost_ms = opt.backward_ms;
              if (op.kind == OpKind::kFullBackward) {
                block.WeightGrad(op.mb);
                cost_ms += opt.weight_ms;
              }
              break;
            }
            case OpKind::kWeight:
              block.WeightGrad(op.mb);
              cost_ms = opt.weight_ms;
              break;
          }
          // The output leaves when the op ends, artificial cost included, as in the simulator.
          PadTo(start, cost_ms, opt.spin);
          const Clock::time_point end = Clock::now();
          if (out_to >= 0) {
            const bool activation = op.kind == OpKind::kForward;
            if (out_to % p == s) {
              inbox.Put({activation, op.mb, out_to / p}, std::move(out));  // a chunk of this rank: no message
            } else {
              outbox.Put({activation, op.mb, op.chunk}, std::move(out));
            }
          }
          res.timeline[s].push_back({op, ms_since_t0(start), ms_since_t0(end)});
        }
        comm_thread.join();
        RETURN_IF_ERROR(comm_status);
        for (int c = 0; c < v; ++c) {
          const int k = VirtualStage(s, c, p);
          res.weight_grad[k] = as_vector(blocks[c]->linear.weight().grad);
          res.bias_grad[k] = as_vector(blocks[c]->linear.bias()->grad);
        }
        return absl::OkStatus();
      },
      copt);
  RETURN_IF_ERROR(comm::FirstError(statuses));

  res.loss = losses[p - 1];
  double busy_sum = 0;
  for (int s = 0; s < p; ++s) {
    for (const TimedOp& t : res.timeline[s]) {
      res.makespan_ms = std::max(res.makespan_ms, t.end);
      busy_sum += t.end - t.start;
    }
  }
  // Measured from the first op's start: rank start-up is not part of the step.
  double first = res.makespan_ms;
  for (int s = 0; s < p; ++s) {
    if (!res.timeline[s].empty()) first = std::min(first, res.timeline[s].front().start);
  }
  for (auto& row : res.timeline) {
    for (TimedOp& t : row) t.start -= first, t.end -= first;
  }
  res.makespan_ms -= first;
  res.bubble_rate = res.makespan_ms > 0 ? 1.0 - (busy_sum / p) / res.makespan_ms : 0.0;
  return res;
}

}  // namespace distlab::pipeline
