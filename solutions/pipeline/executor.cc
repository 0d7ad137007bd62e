// Lab 5 (pipeline), stage C: the executor. See executor.h for the model, the ops and why each rank has a
// communication thread that follows one global message order.
#include "labs/pipeline/executor.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "reference/base/status.h"
#include "reference/comm/comm.h"

namespace distlab::pipeline {

absl::StatusOr<std::vector<Message>> MessageOrder(const Schedule& sc, const Costs& costs) {
  ASSIGN_OR_RETURN(SimResult sim, Simulate(sc, costs));
  struct Timed {
    double t;
    Message msg;
  };
  std::vector<Timed> all;
  for (int s = 0; s < sc.p; ++s) {
    for (const TimedOp& t : sim.timeline[s]) {
      if (t.op.kind == OpKind::kForward && s + 1 < sc.p) all.push_back({t.end, {s, s + 1, true, t.op.mb}});
      const bool input_grad = t.op.kind == OpKind::kBackward || t.op.kind == OpKind::kFullBackward;
      if (input_grad && s > 0) all.push_back({t.end, {s, s - 1, false, t.op.mb}});
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

float Gelu(float x) {
  const float k = 0.7978845608028654f;  // sqrt(2/pi)
  return 0.5f * x * (1.f + std::tanh(k * (x + 0.044715f * x * x * x)));
}
float GeluGrad(float x) {
  const float k = 0.7978845608028654f;
  const float u = k * (x + 0.044715f * x * x * x);
  const float th = std::tanh(u);
  return 0.5f * (1.f + th) + 0.5f * x * (1.f - th * th) * k * (1.f + 3.f * 0.044715f * x * x);
}

// Buffers handed between a rank's compute thread and its communication thread, keyed by message.
class Mailbox {
 public:
  using Key = std::pair<bool, int>;  // (activation?, microbatch)
  void Put(Key key, std::vector<float> data) {
    std::lock_guard<std::mutex> lock(mu_);
    box_[key] = std::move(data);
    cv_.notify_all();
  }
  // Waits for `key` (or a failure) up to `timeout`.
  absl::StatusOr<std::vector<float>> Take(Key key, std::chrono::milliseconds timeout, const std::string& what) {
    std::unique_lock<std::mutex> lock(mu_);
    const bool ready = cv_.wait_for(lock, timeout, [&] { return box_.count(key) > 0 || !failed_.ok(); });
    if (!failed_.ok()) return failed_;
    if (!ready) {
      return absl::DeadlineExceededError(absl::StrCat(what, " did not arrive within ", timeout.count(),
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

// The state of one stage: its block's parameters and gradients, and what each microbatch in flight keeps.
struct StageState {
  int h = 0, rows = 0;
  const std::vector<float>* w = nullptr;  // [h*h]
  const std::vector<float>* b = nullptr;  // [h]
  std::vector<float> dw, db;
  std::map<int, std::vector<float>> x, z, g;  // per microbatch: input, pre-activation, dL/dz

  // F: z = x W^T + b, returns y = GELU(z).
  std::vector<float> Forward(int mb, std::vector<float> in) {
    std::vector<float> zz(static_cast<size_t>(rows) * h), y(zz.size());
    for (int r = 0; r < rows; ++r) {
      for (int o = 0; o < h; ++o) {
        float acc = (*b)[o];
        for (int i = 0; i < h; ++i) acc += in[r * h + i] * (*w)[o * h + i];
        zz[r * h + o] = acc;
        y[r * h + o] = Gelu(acc);
      }
    }
    x[mb] = std::move(in);
    z[mb] = std::move(zz);
    return y;
  }
  // B: g = dy * GELU'(z), returns dx = g W. z is no longer needed; g is kept for W.
  std::vector<float> InputGrad(int mb, const std::vector<float>& dy) {
    std::vector<float>& zz = z[mb];
    std::vector<float> gg(dy.size()), dx(dy.size(), 0.f);
    for (size_t k = 0; k < dy.size(); ++k) gg[k] = dy[k] * GeluGrad(zz[k]);
    for (int r = 0; r < rows; ++r) {
      for (int o = 0; o < h; ++o) {
        const float go = gg[r * h + o];
        for (int i = 0; i < h; ++i) dx[r * h + i] += go * (*w)[o * h + i];
      }
    }
    z.erase(mb);
    g[mb] = std::move(gg);
    return dx;
  }
  // W: dW += g^T x, db += sum over rows of g. Accumulates: the step's gradient is the sum over microbatches.
  void WeightGrad(int mb) {
    const std::vector<float>& gg = g[mb];
    const std::vector<float>& xx = x[mb];
    for (int r = 0; r < rows; ++r) {
      for (int o = 0; o < h; ++o) {
        const float go = gg[r * h + o];
        db[o] += go;
        for (int i = 0; i < h; ++i) dw[o * h + i] += go * xx[r * h + i];
      }
    }
    g.erase(mb);
    x.erase(mb);
  }
};

absl::Status CheckProblem(const Schedule& sc, const PipelineProblem& pr) {
  if (pr.p != sc.p || pr.m != sc.m) {
    return absl::InvalidArgumentError(absl::StrCat("the problem has p = ", pr.p, ", m = ", pr.m,
                                                   " but the schedule has p = ", sc.p, ", m = ", sc.m));
  }
  if (pr.hidden < 1 || pr.rows < 1) {
    return absl::InvalidArgumentError(absl::StrCat("hidden = ", pr.hidden, ", rows = ", pr.rows, "; both must be >= 1"));
  }
  const size_t hh = static_cast<size_t>(pr.hidden) * pr.hidden, rh = static_cast<size_t>(pr.rows) * pr.hidden;
  if (pr.weight.size() != static_cast<size_t>(pr.p) || pr.bias.size() != static_cast<size_t>(pr.p) ||
      pr.input.size() != static_cast<size_t>(pr.m) || pr.target.size() != static_cast<size_t>(pr.m)) {
    return absl::InvalidArgumentError("problem: need p weights and biases, m inputs and targets");
  }
  for (int s = 0; s < pr.p; ++s) {
    if (pr.weight[s].size() != hh || pr.bias[s].size() != static_cast<size_t>(pr.hidden)) {
      return absl::InvalidArgumentError(absl::StrCat("problem: stage ", s, "'s weight or bias has the wrong size"));
    }
  }
  for (int i = 0; i < pr.m; ++i) {
    if (pr.input[i].size() != rh || pr.target[i].size() != rh) {
      return absl::InvalidArgumentError(absl::StrCat("problem: microbatch ", i, " has ", pr.input[i].size(),
                                                     " inputs / ", pr.target[i].size(), " targets; need rows*h = ", rh));
    }
  }
  return absl::OkStatus();
}

// Keeps an op busy until `cost_ms` after `start` (sleep or spin), so runs can be compared with the simulator.
void PadTo(Clock::time_point start, double cost_ms, bool spin) {
  if (cost_ms <= 0) return;
  const auto until = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double, std::milli>(cost_ms));
  if (spin) {
    while (Clock::now() < until) {
    }
  } else {
    std::this_thread::sleep_until(until);
  }
}

}  // namespace

absl::StatusOr<ExecResult> RunPipeline(const Schedule& sc, const PipelineProblem& pr, const ExecutorOptions& opt) {
  RETURN_IF_ERROR(ValidateSchedule(sc));
  RETURN_IF_ERROR(CheckProblem(sc, pr));
  const int p = sc.p, m = sc.m, h = pr.hidden, rows = pr.rows;
  const size_t n = static_cast<size_t>(rows) * h;  // floats per message
  // The global message order, simulated with the artificial costs (unit costs when there are none).
  const Costs costs{opt.forward_ms > 0 ? opt.forward_ms : 1, opt.backward_ms > 0 ? opt.backward_ms : 1,
                    opt.weight_ms > 0 ? opt.weight_ms : 1, 0};
  ASSIGN_OR_RETURN(const std::vector<Message> order, MessageOrder(sc, costs));

  ExecResult res;
  res.weight_grad.assign(p, {});
  res.bias_grad.assign(p, {});
  res.timeline.assign(p, {});
  std::vector<double> losses(p, 0.0);
  const Clock::time_point t0 = Clock::now();
  auto ms_since_t0 = [&](Clock::time_point t) { return std::chrono::duration<double, std::milli>(t - t0).count(); };

  comm::CommOptions copt;
  copt.name = "pipeline";
  copt.timeout = opt.timeout;
  std::vector<absl::Status> statuses = comm::RunRanks(p, [&](int s, comm::Comm& comm, comm::Stream& stream) -> absl::Status {
    Mailbox inbox, outbox;
    // The communication thread: this rank's messages, in the global order, one blocking Send/Recv each.
    absl::Status comm_status;
    std::thread comm_thread([&] {
      for (const Message& msg : order) {
        if (msg.from != s && msg.to != s) continue;
        absl::Status st;
        if (msg.from == s) {
          auto buf = outbox.Take({msg.activation, msg.mb}, opt.timeout,
                                 absl::StrCat("rank ", s, ": its own ", msg.activation ? "activation" : "gradient",
                                              " of microbatch ", msg.mb));
          st = buf.status();
          if (st.ok()) st = comm.Send(buf->data(), n, comm::DataType::kF32, msg.to, stream);
          if (st.ok()) st = stream.Synchronize();  // the buffer must outlive the transfer
        } else {
          std::vector<float> buf(n);
          st = comm.Recv(buf.data(), n, comm::DataType::kF32, msg.from, stream);
          if (st.ok()) st = stream.Synchronize();
          if (st.ok()) inbox.Put({msg.activation, msg.mb}, std::move(buf));
        }
        if (!st.ok()) {
          comm_status = st;
          inbox.Fail(st);
          return;
        }
      }
    });
    auto fail = [&](absl::Status st) {
      outbox.Fail(st);   // unblock the communication thread
      comm.Abort().IgnoreError();  // and every peer blocked on this rank
      comm_thread.join();
      return st;
    };

    StageState st;
    st.h = h, st.rows = rows, st.w = &pr.weight[s], st.b = &pr.bias[s];
    st.dw.assign(static_cast<size_t>(h) * h, 0.f);
    st.db.assign(h, 0.f);
    std::map<int, std::vector<float>> loss_grad;  // last stage: dL/dy per microbatch
    const float inv = 1.f / static_cast<float>(rows * m);
    for (const Op& op : sc.stages[s]) {
      // Inputs first (not part of the op's time: waiting is idle time).
      std::vector<float> in;
      if (op.kind == OpKind::kForward && s > 0) {
        auto got = inbox.Take({true, op.mb}, opt.timeout, absl::StrCat("rank ", s, ": activation of microbatch ", op.mb, " from stage ", s - 1));
        if (!got.ok()) return fail(got.status());
        in = std::move(*got);
      } else if (op.kind == OpKind::kForward) {
        in = pr.input[op.mb];
      }
      const bool input_grad = op.kind == OpKind::kBackward || op.kind == OpKind::kFullBackward;
      if (input_grad && s + 1 < p) {
        auto got = inbox.Take({false, op.mb}, opt.timeout, absl::StrCat("rank ", s, ": gradient of microbatch ", op.mb, " from stage ", s + 1));
        if (!got.ok()) return fail(got.status());
        in = std::move(*got);
      } else if (input_grad) {
        in = std::move(loss_grad[op.mb]);
        loss_grad.erase(op.mb);
      }
      const Clock::time_point start = Clock::now();
      double cost_ms = 0;
      std::vector<float> out;   // what this op sends, if anything
      Mailbox::Key out_key{true, -1};
      switch (op.kind) {
        case OpKind::kForward: {
          std::vector<float> y = st.Forward(op.mb, std::move(in));
          if (s + 1 < p) {
            out = std::move(y);
            out_key = {true, op.mb};
          } else {  // the loss: 1/(2 R m) sum |y - t|^2, dL/dy = (y - t) / (R m)
            const std::vector<float>& t = pr.target[op.mb];
            std::vector<float> dy(n);
            for (size_t k = 0; k < n; ++k) {
              const float d = y[k] - t[k];
              losses[s] += 0.5 * d * d / (rows * m);
              dy[k] = d * inv;
            }
            loss_grad[op.mb] = std::move(dy);
          }
          cost_ms = opt.forward_ms;
          break;
        }
        case OpKind::kBackward:
        case OpKind::kFullBackward: {
          std::vector<float> dx = st.InputGrad(op.mb, in);
          if (s > 0) {
            out = std::move(dx);
            out_key = {false, op.mb};
          }
          cost_ms = opt.backward_ms;
          if (op.kind == OpKind::kFullBackward) {
            st.WeightGrad(op.mb);
            cost_ms += opt.weight_ms;
          }
          break;
        }
        case OpKind::kWeight:
          st.WeightGrad(op.mb);
          cost_ms = opt.weight_ms;
          break;
      }
      // The output leaves when the op ends, artificial cost included, as in the simulator.
      PadTo(start, cost_ms, opt.spin);
      const Clock::time_point end = Clock::now();
      if (out_key.second >= 0) outbox.Put(out_key, std::move(out));
      res.timeline[s].push_back({op, ms_since_t0(start), ms_since_t0(end)});
    }
    comm_thread.join();
    RETURN_IF_ERROR(comm_status);
    res.weight_grad[s] = std::move(st.dw);
    res.bias_grad[s] = std::move(st.db);
    return absl::OkStatus();
  }, copt);
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
