// The generic prepare, whatever the family: an op's name and its tensors' names are checked
// against the registered schemas, and options against what the op takes, before the family
// sees the call; the C ABI's one entry point and its option JSON. Ops are taken from the
// registered families, so the test names none.
#include <nlohmann/json.hpp>

#include "cake_c.h"
#include "op_family.hpp"
#include "ops_args.hpp"

namespace cake {
namespace {
using test::FakeTensor;
using test::kF32;
using test::kGiB;
using test::OpsArgs;

TEST_F(OpsArgs, EveryFamilyRegistersOpsWithASchema) {
  ASSERT_FALSE(ops::op_families().empty());
  for (const ops::FamilyOps* f : ops::op_families()) {
    EXPECT_FALSE(f->ops.empty()) << f->name;
    for (const ops::OpSpec& op : f->ops) {
      EXPECT_EQ(op.name.rfind(f->name + ".", 0), 0u) << op.name << " is not named after " << f->name;
      EXPECT_EQ(ops::find_op(op.name), &op);
      EXPECT_TRUE(op.check) << op.name;
      bool output = false;
      for (const auto& a : op.args) {
        EXPECT_FALSE(a.dtypes.empty()) << op.name << " " << a.name;
        output = output || a.output;
      }
      EXPECT_TRUE(output) << op.name << " writes nothing";
    }
  }
  EXPECT_EQ(ops::find_op("no_such.op"), nullptr);
}

// Every program of every family has a declared kernel argument, and a bind that packs
// anything else is refused before a launch could read garbage.
TEST_F(OpsArgs, EveryProgramDeclaresTheArgumentItsKernelsTake) {
  Runtime rt(opts());
  for (const Program& p : rt.registry().programs()) {
    const ops::FamilyOps* f = ops::find_family(p.family);
    ASSERT_NE(f, nullptr) << p.name;
    ASSERT_TRUE(f->kernel_args) << f->name;
    for (size_t k = 0; k < p.kernels.size(); ++k) {
      const ops::KernelArgs want = f->kernel_args(p, int(k));
      EXPECT_FALSE(want.type.empty()) << p.name << " kernel " << k;
      EXPECT_GT(want.bytes, 0u) << p.name;
      PlannedStage stage;
      stage.program = &p;
      stage.kernel = int(k);
      LaunchStage ls;
      std::vector<unsigned char> blob(want.bytes);
      ls.args.add_bytes(blob.data(), blob.size(), 8);
      EXPECT_NO_THROW(ops::check_packed_args(*f, stage, ls));
      LaunchStage two;
      two.args.add(1);
      two.args.add(2);
      try {
        ops::check_packed_args(*f, stage, two);
        ADD_FAILURE() << p.name << ": two ints passed for one " << want.type;
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("the kernel takes one " + want.type), std::string::npos) << e.what();
      }
    }
  }
}

// Every op, with fake tensors of its first dtypes: the name checks come before its own.
TEST_F(OpsArgs, NamesAndOptionsAreCheckedForEveryOp) {
  Runtime rt(opts());
  for (const ops::FamilyOps* f : ops::op_families())
    for (const ops::OpSpec& op : f->ops) {
      std::vector<std::unique_ptr<FakeTensor>> fakes;
      ops::NamedTensors all;
      for (const auto& a : op.args) {
        const DType t = a.dtypes.front();
        const DLDataType dl = t == DType::bf16 ? DLDataType{kDLBfloat, 16, 1}
                              : t == DType::i32 ? DLDataType{kDLInt, 32, 1}
                                                : DLDataType{kDLFloat, 32, 1};
        fakes.push_back(std::make_unique<FakeTensor>((fakes.size() + 1) * kGiB, dl, std::vector<int64_t>{8}));
        all.emplace_back(a.name, &fakes.back()->dl);
      }
      ops::OpOptions o;
      if (op.takes_eps) o.eps = 1e-6f;
      o.max_sms = -1;
      rejects([&] { ops::prepare(rt, op.name, all, o); }, "max_sms", ">= 0");
      o.max_sms = 0;
      auto extra = all;
      extra.emplace_back("not_an_argument", all.front().second);
      rejects([&] { ops::prepare(rt, op.name, extra, o); }, "not_an_argument", "is not an argument of " + op.name);
      auto twice = all;
      twice.push_back(all.front());
      rejects([&] { ops::prepare(rt, op.name, twice, o); }, all.front().first, "given twice");
      for (size_t i = 0; i < op.args.size(); ++i) {
        if (op.args[i].optional) continue;
        auto fewer = all;
        fewer.erase(fewer.begin() + long(i));
        rejects([&] { ops::prepare(rt, op.name, fewer, o); }, op.args[i].name, "missing");
        auto null = all;
        null[i].second = nullptr;
        rejects([&] { ops::prepare(rt, op.name, null, o); }, op.args[i].name, "null");
      }
      ops::OpOptions acc = o;
      acc.accumulate = true;
      if (!op.takes_accumulate) rejects([&] { ops::prepare(rt, op.name, all, acc); }, "accumulate", "does not accumulate");
      ops::OpOptions eps = o;
      eps.eps = op.takes_eps ? std::nullopt : std::optional<float>(1e-6f);
      rejects([&] { ops::prepare(rt, op.name, all, eps); }, "eps", op.takes_eps ? "needs eps" : "takes no eps");
    }
  rejects([&] { ops::prepare(rt, "no_such.op", {}); }, "op", "unknown op 'no_such.op' (known: ");
}

TEST_F(OpsArgs, CAbiNullsAndOptions) {
  cake_runtime* rt = nullptr;
  EXPECT_EQ(cake_runtime_create(nullptr, nullptr), CAKE_ERROR_ARGUMENT);
  EXPECT_EQ(cake_runtime_create("{\"registry\": 3}", &rt), CAKE_ERROR_ARGUMENT);
  EXPECT_NE(std::string(cake_last_error()).find("options_json"), std::string::npos);
  EXPECT_EQ(cake_runtime_create("[1]", &rt), CAKE_ERROR_ARGUMENT);
  ASSERT_EQ(cake_runtime_create("{\"cache_dir\": \"\", \"jit\": true}", &rt), CAKE_OK) << cake_last_error();
  const std::string op = ops::op_families().front()->ops.front().name;
  FakeTensor t(1 * kGiB, kF32, {8});
  const DLTensor* tensors[] = {&t.dl};
  const char* names[] = {"x"};
  const char* null_name[] = {nullptr};
  cake_launch* l = nullptr;
  auto expect = [&](cake_status st, const std::string& text) {
    EXPECT_EQ(st, CAKE_ERROR_ARGUMENT) << cake_last_error();
    EXPECT_NE(std::string(cake_last_error()).find(text), std::string::npos) << cake_last_error();
    EXPECT_EQ(l, nullptr);
  };
  expect(cake_prepare(nullptr, op.c_str(), 1, names, tensors, nullptr, &l), "argument 'rt': null");
  expect(cake_prepare(rt, nullptr, 1, names, tensors, nullptr, &l), "argument 'op': null");
  expect(cake_prepare(rt, op.c_str(), -1, names, tensors, nullptr, &l), "argument 'n': must be >= 0");
  expect(cake_prepare(rt, op.c_str(), 1, nullptr, tensors, nullptr, &l), "argument 'names': null");
  expect(cake_prepare(rt, op.c_str(), 1, names, nullptr, nullptr, &l), "argument 'tensors': null");
  expect(cake_prepare(rt, op.c_str(), 1, null_name, tensors, nullptr, &l), "argument 'names[0]': null");
  expect(cake_prepare(rt, op.c_str(), 1, names, tensors, nullptr, nullptr), "argument 'launch': null");
  expect(cake_prepare(rt, "no_such.op", 0, nullptr, nullptr, nullptr, &l), "unknown op 'no_such.op'");
  for (const char* bad : {"{", "[1]", "{\"deterministic\": 1}", "{\"max_sms\": 1.5}", "{\"eps\": \"x\"}",
                          "{\"frobnicate\": true}", "{\"max_sms\": 99999999999}", "{\"external_memory\": 1}"})
    expect(cake_prepare(rt, op.c_str(), 0, nullptr, nullptr, bad, &l), "argument 'options_json'");
  expect(cake_run(rt, "no_such.op", 0, nullptr, nullptr, nullptr, nullptr), "unknown op");
  EXPECT_EQ(cake_launch_run(nullptr, nullptr), CAKE_ERROR_ARGUMENT);
  expect(cake_launch_rebind(nullptr, 1, names, tensors, nullptr), "argument 'launch': null");
  void* addresses[1] = {nullptr};
  expect(cake_launch_rebind_data(nullptr, 1, addresses, nullptr), "argument 'launch': null");
  EXPECT_EQ(cake_launch_memory_bytes(nullptr), 0u);
  EXPECT_EQ(std::string(cake_launch_describe(nullptr)), "");
  cake_runtime_destroy(rt);
}

TEST(CAbi, OpsJsonListsEverySchema) {
  const auto doc = nlohmann::json::parse(cake_ops_json());
  size_t n = 0;
  for (const ops::FamilyOps* f : ops::op_families()) n += f->ops.size();
  ASSERT_EQ(doc.size(), n);
  for (const auto& op : doc) {
    const ops::OpSpec* spec = ops::find_op(op.at("op").get<std::string>());
    ASSERT_NE(spec, nullptr) << op.dump();
    ASSERT_EQ(op.at("args").size(), spec->args.size());
    EXPECT_EQ(op.at("accumulate").get<bool>(), spec->takes_accumulate);
    EXPECT_EQ(op.at("eps").get<bool>(), spec->takes_eps);
    for (size_t i = 0; i < spec->args.size(); ++i) {
      EXPECT_EQ(op["args"][i].at("name"), spec->args[i].name);
      EXPECT_EQ(op["args"][i].at("dtypes")[0], dtype_name(spec->args[i].dtypes[0]));
    }
  }
}

}  // namespace
}  // namespace cake
