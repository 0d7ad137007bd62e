"""Macros that declare a lab, its solution, its public tests and its graded (hidden) tests.

A lab `L` is described once, in `labs/L/lab.bzl`:

    LAB = struct(name = "collectives", hdrs = [...], srcs = ["ring.cc", ...], deps = [...],
                 public_tests = {"ring_test": ["ring"], "bandwidth_test": ["bandwidth", "harness"], ...},
                 symbol_margin = [...], symbol_needs = [...])

`srcs` are the student-editable files; `solutions/L/` holds files of the same names. A lab that builds on
the student's own files of earlier labs (the capstone links Lab 4's and Lab 5's) lists them in an optional
`prior = {"parallel": ["tensor_parallel.cc"], ...}` and puts those labs' `:impl` in its deps; `labctl grade`
takes the prior files from the submission as well (`:prior_files`). `symbol_margin` and
`symbol_needs` (optional) are the lab's symbol rules for the grader (tools/build_defs/grading.bzl). Then:

  labs/L/BUILD       lab(LAB)   (its :impl is //solutions/L:impl under --config=solution wherever course.bzl
                                says HAS_SOLUTIONS; the handout's course.bzl says False)
  solutions/L/BUILD  lab_solution(LAB)
  tests/L/BUILD      graded_test(...) for each hidden test file, then lab_mutants(LAB)

Targets made by `lab`:
  :headers        the interface (hdrs only) that tests and implementations compile against
  :student_impl   the student's files (in the handout these are the stubs); alias :impl_stub
  :impl           :student_impl by default, //solutions/L:impl under --config=solution
  :student_files  filegroup of the student-editable files (read by the grader, release and lint)
  :prior_files    filegroup of the earlier labs' student files this lab links (`prior`; often empty)
  :symbol_rules   JSON: what the grader lets the student objects reference and define (grading.bzl)

Targets made by `graded_test(name, ...)` (name = <piece>_hidden_test, or <piece>_<aspect>_hidden_test with
`pieces` listed; a piece is a student file's stem):
  name                       the graded test, linking :impl (tags: graded, lab=L, stage=X)
  name_stub                  the same test linking the stubs (manual)        -- gate 2
  name_mutant_<m>            the same test linking mutant m, for each mutant of its pieces (manual) -- gate 3
  name_manifest              JSON: lab, stage, target, pieces, points per case, variants

Targets made by `public_test(name, lab = LAB, ...)` in labs/L (name = <piece>_test or <piece>_<aspect>_test, a
key of LAB.public_tests, whose value lists the pieces the test exercises, the one it is named after first):
  name                       the public test, linking :impl (tags: public, lab=L, stage=X)
  name_lib                   its cases, without an implementation (visible to //tests/L)
and by `lab_mutants(LAB)` in tests/L, for each public test P of LAB.public_tests:
  P_mutant_<m>               P's cases linked with mutant m, for each mutant of P's pieces (manual; tags
                             public_mutant, public_mutant=<m>)                                  -- gate 4
  P_public_manifest          JSON: lab, target, pieces, variants (what the gates read)

Gate 4 (tools/grader/gates.cc, `lab`): every mutant whose preamble says `kind: convention` must fail at least
one case of the public tests of its piece, the one named after the piece first. labctl builds the public
variants of the convention mutants only (it asks `gates mutants --kind convention` for their names and queries
the public_mutant=<m> tags), so a logic mutant costs no extra link.

A mutant is a file `tests/L/mutants/<stem>__<what>.diff`: the unified diff (`diff -u`) that turns
`solutions/L/<stem>.cc` into the buggy file. At build time //tools/mutate applies it (hunks found by their text,
each exactly once; a hunk that no longer applies fails the build, naming the hunk), and the result replaces that
solution file. Dropping a diff there is all it takes to add one (`lab_mutants` and `graded_test` find them with
glob). To make one: copy the solution file, put the bug in, `diff -u solution copy > mutants/<stem>__<what>.diff`,
and put its preamble before the `---` line (tools/grader/mutants.h: `bug:`, `kind: logic | convention`, `hint:`).
"""

load("//tools/build_defs:course.bzl", "HAS_SOLUTIONS")
load("//tools/build_defs:grading.bzl", "symbol_rules_json")
load("//tools/build_defs:gpu.bzl", "gpu_variant")

_MAIN = "//tools/testing:gtest_main"
_GTEST = ["//third_party:gtest", "//third_party:gmock"]

def _solution_label(lab, f):
    return "//solutions/%s:%s" % (lab.name, f)

def lab(lab, visibility = ["//visibility:public"]):
    """Declares the handout targets of a lab (see the file comment)."""
    native.cc_library(
        name = "headers",
        hdrs = lab.hdrs,
        deps = lab.deps,
        visibility = visibility,
    )
    native.cc_library(
        name = "student_impl",
        srcs = lab.srcs,
        deps = [":headers"] + lab.deps,
        alwayslink = True,
        visibility = visibility,
    )
    native.alias(name = "impl_stub", actual = ":student_impl", visibility = visibility)
    native.filegroup(name = "student_files", srcs = lab.srcs, visibility = visibility)
    native.exports_files(lab.srcs, visibility = ["//labs:__subpackages__"])  # for later labs' :prior_files
    prior = getattr(lab, "prior", {})
    native.filegroup(
        name = "prior_files",
        srcs = ["//labs/%s:%s" % (l, f) for l in sorted(prior.keys()) for f in prior[l]],
        visibility = visibility,
    )
    native.genrule(
        name = "symbol_rules",
        outs = ["symbol_rules.json"],
        cmd = "cat > $@ <<'DISTLAB_EOF'\n" + symbol_rules_json(lab) + "\nDISTLAB_EOF",
        visibility = visibility,
    )
    if HAS_SOLUTIONS:
        actual = select({
            "//tools/build_defs:use_solution": _solution_label(lab, "impl"),
            "//conditions:default": ":student_impl",
        })
    else:
        actual = ":student_impl"
    native.alias(name = "impl", actual = actual, visibility = visibility)

def _stem(f):
    return f[:-len(".cc")] if f.endswith(".cc") else f

def lab_solution(lab, extra_srcs = [], extra_deps = []):
    """The reference solution of a lab: files named as the lab's student files, implementing its headers.

    Each file is its own library (`:part_<stem>`) and `:impl` joins them, so that a mutant (which replaces one
    file) links the other files' objects instead of compiling them again: with a dozen mutants per lab that is
    the difference between one compile per mutant and one compile per file per mutant.
    """
    native.exports_files(lab.srcs + extra_srcs, visibility = ["//tests/%s:__subpackages__" % lab.name])
    parts = []
    for f in lab.srcs + extra_srcs:
        native.cc_library(
            name = "part_" + _stem(f),
            srcs = [f],
            deps = ["//labs/%s:headers" % lab.name] + lab.deps + extra_deps,
            alwayslink = True,
            visibility = ["//tests/%s:__subpackages__" % lab.name],
        )
        parts.append(":part_" + _stem(f))
    native.cc_library(
        name = "impl",
        deps = parts,
        alwayslink = True,
        visibility = ["//visibility:public"],
    )

    # The undefined symbols of the solution's and the stubs' objects: the derived part of the lab's symbol
    # allowlist (tools/build_defs/grading.bzl), read by the grader and the gates.
    # The tool is a source, not a `tools` entry, so it is the one labctl builds (the target configuration)
    # rather than a second copy compiled for the host.
    inputs = parts + ["//labs/%s:student_impl" % lab.name]
    native.genrule(
        name = "reference_symbols",
        srcs = inputs + ["//tools/grader:symbols"],
        outs = ["reference_symbols.txt"],
        cmd = "$(location //tools/grader:symbols) undefined --out $@ " +
              " ".join(["$(locations %s)" % i for i in inputs]),
        visibility = ["//visibility:public"],
    )

def _mutants():
    """(name, stem, file) for each mutants/<stem>__<name>.diff of the calling package."""
    out = []
    for f in native.glob(["mutants/*.diff"]):
        base = f[len("mutants/"):-len(".diff")]
        if "__" not in base:
            fail("mutant file %s must be named <solution stem>__<mistake>.diff" % f)
        stem, what = base.split("__", 1)
        out.append((what, stem, f))
    return out

def lab_mutants(lab, extra_srcs = [], extra_deps = []):
    """One library per mutant: the solution file with the mutant's diff applied, compiled alone and linked with
    the other files' solution parts. Then, for each public test of LAB.public_tests, its mutant variants and
    its public manifest (gate 4; see the file comment)."""
    mutants = _mutants()
    for what, stem, f in mutants:
        replaced = stem + ".cc"
        if replaced not in lab.srcs + extra_srcs:
            fail("mutant %s replaces %s, which is not a solution file of lab %s" % (f, replaced, lab.name))
        src = "mutant_src/%s__%s.cc" % (stem, what)
        native.genrule(
            name = "mutant_src_" + what,
            srcs = [_solution_label(lab, replaced), f],
            outs = [src],
            tools = ["//tools/mutate"],
            cmd = "$(location //tools/mutate) --source $(location %s) --diff $(location %s) --out $@" % (
                _solution_label(lab, replaced),
                f,
            ),
            testonly = True,
            tags = ["manual"],
        )
        native.cc_library(
            name = "impl_mutant_" + what,
            srcs = [src],
            deps = ["//labs/%s:headers" % lab.name] + lab.deps + extra_deps +
                   [_solution_label(lab, "part_" + _stem(s)) for s in lab.srcs + extra_srcs if s != replaced],
            alwayslink = True,
            testonly = True,
            tags = ["manual"],
        )
    _public_variants(lab, mutants)

def _public_variants(lab, mutants):
    """For each public test P of the lab (LAB.public_tests: name -> pieces): `P_mutant_<m>`, P's cases (the
    `//labs/<lab>:P_lib` that public_test makes) linked with mutant m, for each mutant of P's pieces (manual,
    tagged public_mutant and public_mutant=<m>, so that the gates build only those of convention mutants); and
    `P_public_manifest` (P.public_manifest.json: lab, target, pieces, variants), which the gates read to
    find the public tests of a mutant's piece."""
    for pub, pieces in sorted(getattr(lab, "public_tests", {}).items()):
        lib = "//labs/%s:%s_lib" % (lab.name, pub)
        variants = []
        for what, stem, _ in mutants:
            if stem not in pieces:
                continue
            vname = pub + "_mutant_" + what
            variants.append(vname)
            native.cc_test(
                name = vname,
                deps = [lib, ":impl_mutant_" + what, _MAIN],
                size = "small",
                tags = ["manual", "public_mutant", "public_mutant=" + what, "lab=" + lab.name],
                linkstatic = True,
            )
        manifest = '{"lab": %s, "target": %s, "public": true, "pieces": [%s], "variants": [%s]}' % (
            _json_string(lab.name),
            _json_string("//labs/%s:%s" % (lab.name, pub)),
            ", ".join([_json_string(p) for p in pieces]),
            ", ".join([_json_string("mutant:" + v) for v in variants]),
        )
        native.genrule(
            name = pub + "_public_manifest",
            srcs = [lib],  # fails here, naming the label, when labs/<lab>/BUILD declares no such public test
            outs = [pub + ".public_manifest.json"],
            cmd = "cat > $@ <<'DISTLAB_EOF'\n" + manifest + "\nDISTLAB_EOF",
            testonly = True,
            tags = ["public_manifest"],
        )

def _json_string(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'

def _pieces(lab):
    """The stems of a lab's student-editable files: its pieces (ring.cc -> "ring")."""
    return [_stem(f) for f in lab.srcs]

def _check_test_name(name, suffix, pieces, lab, what):
    """A test of a piece is named <piece>_<suffix> or <piece>_<aspect>_<suffix>, after its first piece."""
    if not name.endswith(suffix):
        fail("%s %s must be named <piece>%s" % (what, name, suffix))
    for p in pieces:
        if p not in _pieces(lab):
            fail("%s %s: %s is not a piece of lab %s (its pieces: %s)" % (
                what,
                name,
                p,
                lab.name,
                ", ".join(_pieces(lab)),
            ))
    first = pieces[0]
    if name != first + suffix and not name.startswith(first + "_"):
        fail("%s %s tests %s, so its name must start with %s (rename it, or list its pieces first)" % (
            what,
            name,
            first,
            first,
        ))

def graded_test(name, lab, stage, srcs, points, pieces = None, deps = [], size = "small", tags = [],
                data = [], timeout_s = 60, gpu = False, gpus = 0):
    """A hidden, graded GoogleTest target plus its stub and mutant variants and its manifest.

    Args:
      lab: the lab's LAB struct (labs/<lab>/lab.bzl).
      stage: "A", "B", ... (the stage all of this file's cases belong to).
      points: {"Suite.Case": points} for every case the binary contains; check-tests verifies the match.
      pieces: the student files (stems) this test grades, first the one it is named after; by default the
        stem of its name (ring_hidden_test -> ["ring"]). A second test of a piece is named
        <piece>_<aspect>_hidden_test and lists its pieces. Only the mutants of these pieces get a variant of
        this test, and the gates try each mutant on the tests that grade its piece.
      timeout_s: per-case timeout used by the grader's runner and by the in-process case watchdog.
      gpu: the cases need GPUs (tagged gpu; they skip where none are found).
      gpus: when > 0, also `<name>_gpu`: the same binary with its communicators on the nccl backend, needing
        this many GPUs (gpu.bzl: gpu_variant). Not graded separately: same cases, same points.
    """
    if not points:
        fail("graded_test %s declares no points" % name)
    if pieces == None:
        pieces = [name[:-len("_hidden_test")]]
    _check_test_name(name, "_hidden_test", pieces, lab, "graded_test")
    lib = name + "_lib"
    native.cc_library(
        name = lib,
        srcs = srcs,
        deps = ["//labs/%s:headers" % lab.name, "//tools/testing:test_support"] + _GTEST + deps,
        alwayslink = True,
        testonly = True,
        visibility = ["//visibility:private"],
    )
    base_tags = ["graded", "lab=" + lab.name, "stage=" + stage] + (["gpu"] if gpu else []) + tags
    env = {"DISTLAB_CASE_TIMEOUT_S": str(timeout_s)}
    native.cc_test(
        name = name,
        deps = [":" + lib, "//labs/%s:impl" % lab.name, _MAIN] +
               (["//reference/comm:test_backend"] if gpus else []),
        size = size,
        tags = base_tags,
        data = data,
        env = env,
        linkstatic = True,
    )
    if gpus:
        gpu_variant(name, ":" + name, gpus, tags = ["lab=" + lab.name, "stage=" + stage],
                    timeout_s = 2 * timeout_s)
    variants = [(name + "_stub", "//labs/%s:student_impl" % lab.name, "stub")]
    for what, stem, _ in _mutants():
        if stem in pieces:
            variants.append((name + "_mutant_" + what, ":impl_mutant_" + what, "mutant"))
    for vname, impl, kind in variants:
        native.cc_test(
            name = vname,
            deps = [":" + lib, impl, _MAIN],
            size = size,
            tags = ["manual", kind, "lab=" + lab.name],
            data = data,
            env = env,
            linkstatic = True,
        )

    cases = ", ".join(["%s: %d" % (_json_string(c), p) for c, p in sorted(points.items())])
    manifest = ('{"lab": %s, "stage": %s, "target": %s, "timeout_s": %d, "gpu": %s, "pieces": [%s], ' +
                '"cases": {%s}, "variants": [%s]}') % (
        _json_string(lab.name),
        _json_string(stage),
        _json_string("//%s:%s" % (native.package_name(), name)),
        timeout_s,
        "true" if gpu else "false",
        ", ".join([_json_string(p) for p in pieces]),
        cases,
        ", ".join([_json_string("%s:%s" % (kind, v)) for v, _, kind in variants]),
    )
    native.genrule(
        name = name + "_manifest",
        outs = [name + ".manifest.json"],
        cmd = "cat > $@ <<'DISTLAB_EOF'\n" + manifest + "\nDISTLAB_EOF",
        tags = ["manifest"],
    )

def _public_pieces(lab, name):
    """The pieces of public test `name`, from the one place they are declared: LAB.public_tests."""
    if type(lab) == "string":
        fail("public_test %s: lab must be the lab's LAB struct (load(\":lab.bzl\", \"LAB\")), not %r" % (
            name,
            lab,
        ))
    tests = getattr(lab, "public_tests", None)
    if tests == None or name not in tests:
        fail("public_test %s: add it to LAB.public_tests in labs/%s/lab.bzl with the pieces it exercises" % (
            name,
            lab.name,
        ))
    return tests[name]

def public_test(name, lab, stage, srcs, deps = [], size = "small", tags = [], data = [], timeout_s = 60,
                gpus = 0):
    """A public test in labs/<lab>/: links :impl, so it fails on the stubs with the TODO's message.

    lab: the lab's LAB struct; `name` must be a key of LAB.public_tests, whose value lists the pieces the test
      exercises (first the one it is named after). The cases live in `<name>_lib`, visible to //tests/<lab>,
      where lab_mutants(LAB) links them with each mutant of those pieces (gate 4).
    gpus: when > 0, also `<name>_gpu`, the same binary on the nccl backend (see graded_test).
    """
    pieces = _public_pieces(lab, name)
    if name.endswith("_hidden_test"):
        fail("public_test %s: a public test's name must not end in _hidden_test" % name)
    _check_test_name(name, "_test", pieces, lab, "public_test")
    if gpus:
        gpu_variant(name, ":" + name, gpus, tags = ["lab=" + lab.name, "stage=" + stage],
                    timeout_s = 2 * timeout_s)
    native.cc_library(
        name = name + "_lib",
        srcs = srcs,
        deps = ["//labs/%s:headers" % lab.name, "//tools/testing:test_support"] + _GTEST + deps +
               (["//reference/comm:test_backend"] if gpus else []),
        data = data,
        alwayslink = True,
        testonly = True,
        visibility = ["//labs/%s:__pkg__" % lab.name, "//tests/%s:__pkg__" % lab.name],
    )
    native.cc_test(
        name = name,
        deps = [":" + name + "_lib", "//labs/%s:impl" % lab.name, _MAIN],
        size = size,
        tags = ["public", "lab=" + lab.name, "stage=" + stage] + tags,
        data = data,
        env = {"DISTLAB_CASE_TIMEOUT_S": str(timeout_s)},
        linkstatic = True,
    )

def runtime_test(name, srcs, deps = [], size = "small", tags = [], data = [], timeout_s = 60, threads = True):
    """A test of the course runtime (reference/): not graded. ./labctl test runs it again under TSan unless
    threads = False (tag "single_threaded": the test starts no thread, so it cannot race; --sanitize runs it
    under TSan all the same)."""
    native.cc_test(
        name = name,
        srcs = srcs,
        deps = ["//tools/testing:test_support", _MAIN] + _GTEST + deps,
        size = size,
        tags = ["runtime"] + ([] if threads else ["single_threaded"]) + tags,
        data = data,
        env = {"DISTLAB_CASE_TIMEOUT_S": str(timeout_s)},
        linkstatic = True,
    )

def grading_limits(name = "limits", address_space_mb = 4096, processes = 128, file_size_mb = 256,
                   open_files = 256, cpu_seconds = 60, tmpfs_mb = 256, timeout_floor_s = 5,
                   timeout_multiple = 10):
    """What one graded case of the lab may use, declared beside its hidden tests (`:limits`, a JSON file the
    grader's runner reads with --limits; tools/grader/README.md).

    The runner sets them on each case's test process; a case that runs into one fails naming it.
      address_space_mb: RLIMIT_AS (the reference solution's cases peak at about 1.3 GiB: thread stacks and
        allocator arenas count)
      processes: RLIMIT_NPROC of the grading user, threads included (two cases run at once)
      file_size_mb: RLIMIT_FSIZE;  open_files: RLIMIT_NOFILE;  cpu_seconds: RLIMIT_CPU (SIGXCPU)
      tmpfs_mb: the size of each case's private /tmp, /var/tmp and /dev/shm (when the runner is root)
      timeout_floor_s, timeout_multiple: a case's timeout is max(floor, multiple x the solution's measured
        time for that case), the time recorded in tests/<lab>/grading.json; the graded_test's timeout_s
        where no time is recorded
    """
    fields = [
        ("address_space_mb", address_space_mb),
        ("processes", processes),
        ("file_size_mb", file_size_mb),
        ("open_files", open_files),
        ("cpu_seconds", cpu_seconds),
        ("tmpfs_mb", tmpfs_mb),
        ("timeout_floor_s", timeout_floor_s),
        ("timeout_multiple", timeout_multiple),
    ]
    for k, v in fields:
        if v <= 0:
            fail("grading_limits %s: %s must be positive, not %s" % (name, k, v))
    text = "{" + ", ".join(['"%s": %s' % (k, v) for k, v in fields]) + "}"
    native.genrule(
        name = name,
        outs = [name + ".json"],
        cmd = "echo '%s' > $@" % text,
        tags = ["manifest"],
    )
