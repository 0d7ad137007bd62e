"""precompiled_header: one GCC precompiled header, built with the flags of the compiles that use it.

Every C++ file of the course spends most of its compile time parsing the same headers (the standard library,
absl's Status, gtest), not its own code. A precompiled header parses them once per configuration. GCC uses a
precompiled header only when the compile that includes it has the same flags as the compile that made it:
nothing checks the optimisation level, and a mismatch can silently change the code or crash the compiler. So
the flags here are not written down a second time: they are the C++ toolchain's own compile command line for
this configuration (its features, --copt, --cxxopt), plus `copts`, the per-file options of the files that use
this header (.bazelrc's --per_file_copt lines, which must list the same options).
"""

load("@bazel_tools//tools/cpp:toolchain_utils.bzl", "find_cpp_toolchain")

_CPP_COMPILE = "c++-compile"  # ACTION_NAMES.cpp_compile (its .bzl in @bazel_tools has no package to load it from here)

def _is_tool_configuration(ctx):
    # Bazel applies --per_file_copt to the target configuration only, so a tool built for the host or an exec
    # platform (a genrule's `tools`) never includes a precompiled header: make none there.
    path = ctx.bin_dir.path
    return path.startswith("bazel-out/host/") or "-exec-" in path

def _precompiled_header_impl(ctx):
    if _is_tool_configuration(ctx):
        return [DefaultInfo(), CcInfo()]
    cc_toolchain = find_cpp_toolchain(ctx)
    features = cc_common.configure_features(
        ctx = ctx,
        cc_toolchain = cc_toolchain,
        requested_features = ctx.features,
        unsupported_features = ctx.disabled_features,
    )

    # `<name>.h` is what a compile includes (-include third_party/pch/<name>.h); GCC looks for `<name>.h.gch`
    # beside it and reads that instead.
    header = ctx.actions.declare_file(ctx.label.name + ".h")
    gch = ctx.actions.declare_file(ctx.label.name + ".h.gch")
    ctx.actions.write(header, "".join(['#include "%s"\n' % f.path for f in ctx.files.srcs]))
    variables = cc_common.create_compile_variables(
        feature_configuration = features,
        cc_toolchain = cc_toolchain,
        user_compile_flags = ctx.fragments.cpp.copts + ctx.fragments.cpp.cxxopts + ctx.attr.copts +
                             ["-x", "c++-header"],
        source_file = header.path,
        output_file = gch.path,
        use_pic = True,
        quote_include_directories = depset(["."]),
    )
    ctx.actions.run(
        executable = cc_common.get_tool_for_action(
            feature_configuration = features,
            action_name = _CPP_COMPILE,
        ),
        arguments = cc_common.get_memory_inefficient_command_line(
            feature_configuration = features,
            action_name = _CPP_COMPILE,
            variables = variables,
        ),
        env = cc_common.get_environment_variables(
            feature_configuration = features,
            action_name = _CPP_COMPILE,
            variables = variables,
        ),
        inputs = depset([header] + ctx.files.srcs, transitive = [cc_toolchain.all_files]),
        outputs = [gch],
        mnemonic = "PrecompileHeader",
        progress_message = "Precompiling %s" % header.short_path,
    )
    return [
        DefaultInfo(files = depset([header, gch])),
        CcInfo(compilation_context = cc_common.create_compilation_context(
            headers = depset([header, gch] + ctx.files.srcs),
        )),
    ]

precompiled_header = rule(
    implementation = _precompiled_header_impl,
    attrs = {
        "srcs": attr.label_list(allow_files = [".h"], doc = "headers of #include lines to precompile, in order"),
        "copts": attr.string_list(doc = "the per-file options of the compiles that include this header"),
        "_cc_toolchain": attr.label(default = Label("@bazel_tools//tools/cpp:current_cc_toolchain")),
    },
    fragments = ["cpp"],
    toolchains = ["@bazel_tools//tools/cpp:toolchain_type"],
    incompatible_use_toolchain_transition = True,
)
