// The test framework, after base_headers.h, precompiled for the test files (third_party/pch/BUILD).
#include "gmock/gmock.h"
#include "gtest/gtest.h"
