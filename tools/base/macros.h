// Preprocessor helpers shared by the Status macros (reference/base/status.h), the test macros
// (tools/testing/test_support.h) and the benchmark ratios (tools/bench/ratio.h).
#ifndef DISTLAB_TOOLS_BASE_MACROS_H_
#define DISTLAB_TOOLS_BASE_MACROS_H_

// DISTLAB_CONCAT(x_, __LINE__) pastes after expanding its arguments, so each use of a macro that declares a
// temporary gets a name of its own (x_41, x_42, ...). The inner step is what makes __LINE__ expand first.
#define DISTLAB_CONCAT_INNER_(a, b) a##b
#define DISTLAB_CONCAT(a, b) DISTLAB_CONCAT_INNER_(a, b)

#endif  // DISTLAB_TOOLS_BASE_MACROS_H_
