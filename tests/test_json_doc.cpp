// The flat JSON reader the registry, build.json and shapes files go through: what it accepts
// is what nlohmann's parser accepts, value for value, and what it refuses names the line and
// column. tests/fuzz/fuzz_json.cpp compares the two parsers on generated input.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "error.hpp"
#include "json_doc.hpp"
#include "json_reader.hpp"
#include "registry.hpp"

namespace cake {
namespace {

std::shared_ptr<const JsonDoc> parse(std::string_view text) { return JsonDoc::parse(text, "t.json"); }

std::string refusal(std::string_view text) {
  try {
    parse(text);
  } catch (const RegistryError& e) {
    return e.what();
  }
  return "";
}

TEST(JsonDoc, ValuesMatchNlohmann) {
  const std::string text = R"({"a": [1, -2, 3.5, 1e3, -0, 18446744073709551615, -9223372036854775809],
    "s": "x\"\\\/\b\f\n\r\t\u00e9\u20ac\ud83d\ude00 é", "t": true, "f": false, "n": null,
    "o": {"": {}, "deep": [[[]]], "~/": 0, "b": "\u0001\u001f\u007f"}, "e": [{}, [], ""]})";
  EXPECT_EQ(parse(text)->root().to_nlohmann(), nlohmann::json::parse(text));
}

// source() is how program params keep their text (parsed on first use): each value's own
// text, brackets inside strings and escaped quotes included.
TEST(JsonDoc, SourceIsTheValuesOwnText) {
  const std::string text = R"( {"a": {"k": "}]\"{", "n": [1, {"x": -2.5e3}]}, "b": [ true , null ], "c": 17,
    "d": "s\u0041"} )";
  auto d = parse(text);
  JsonValue v = d->root();
  EXPECT_EQ(v.source(), text.substr(1, text.size() - 2));
  ASSERT_TRUE(d->root().find("a", &v));
  EXPECT_EQ(v.source(), R"({"k": "}]\"{", "n": [1, {"x": -2.5e3}]})");
  EXPECT_EQ(nlohmann::json::parse(v.source()), v.to_nlohmann());
  ASSERT_TRUE(d->root().find("b", &v));
  EXPECT_EQ(v.source(), "[ true , null ]");
  EXPECT_EQ(v.element(0).source(), "true");
  ASSERT_TRUE(d->root().find("c", &v));
  EXPECT_EQ(v.source(), "17");
  ASSERT_TRUE(d->root().find("d", &v));
  EXPECT_EQ(v.source(), R"("s\u0041")");
  EXPECT_EQ(v.str(), "sA");
  // parse_view reads the caller's text (no copy) and gives the same values.
  auto view = JsonDoc::parse_view(text, "t.json");
  EXPECT_EQ(view->root().to_nlohmann(), d->root().to_nlohmann());
  EXPECT_EQ(view->root().source().data(), text.data() + 1);
}

TEST(JsonDoc, EveryEmbeddedRegistryDocumentMatchesNlohmann) {
  for (const auto& s : Registry::embedded_sources()) {
    const auto doc = JsonDoc::parse(s.text, s.file);
    EXPECT_EQ(doc->root().to_nlohmann(), nlohmann::json::parse(s.text)) << s.file;
  }
}

TEST(JsonDoc, NumbersKeepTheirKind) {
  auto d = parse("[9223372036854775807, 9223372036854775808, -9223372036854775808, 1.0, 2]");
  auto r = d->root();
  EXPECT_TRUE(r.element(0).is_integer());
  EXPECT_EQ(r.element(0).int64(), INT64_MAX);
  EXPECT_TRUE(r.element(1).is_integer());
  EXPECT_TRUE(r.element(1).is_unsigned_only());
  EXPECT_EQ(r.element(1).uint64(), uint64_t(INT64_MAX) + 1);
  EXPECT_EQ(r.element(2).int64(), INT64_MIN);
  EXPECT_EQ(r.element(3).type(), JsonValue::Type::number);
  EXPECT_STREQ(r.element(3).type_name(), "number");
  EXPECT_EQ(r.element(4).int64(), 2);
}

TEST(JsonDoc, StringsDecodeEscapesToUtf8) {
  auto d = parse(R"(["\u0041\u00e9\u20ac\ud83d\ude00", "a\u0000b"])");
  EXPECT_EQ(d->root().element(0).str(), "A\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80");
  EXPECT_EQ(d->root().element(1).str(), std::string_view("a\0b", 3));
}

TEST(JsonDoc, ObjectsKeepDocumentOrderAndFindByName) {
  auto d = parse(R"({"b": 1, "a": 2, "c": {"x": [true]}})");
  auto r = d->root();
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r.key(0), "b");
  EXPECT_EQ(r.key(1), "a");
  JsonValue c = r;
  ASSERT_TRUE(r.find("c", &c));
  JsonValue x = c;
  ASSERT_TRUE(c.find("x", &x));
  EXPECT_TRUE(x.element(0).boolean());
  EXPECT_FALSE(r.find("z", &x));
  EXPECT_FALSE(x.find("a", &x)) << "an array has no members";
}

TEST(JsonDoc, PointersFollowRfc6901) {
  auto d = parse(R"({"a/b": {"m~n": [0, {"k": null}]}})");
  JsonValue v = d->root(), w = v;
  ASSERT_TRUE(v.find("a/b", &w));
  ASSERT_TRUE(w.find("m~n", &v));
  EXPECT_EQ(v.element(1).pointer(), "/a~1b/m~0n/1");
  EXPECT_EQ(d->root().pointer(), "");
  ASSERT_TRUE(v.element(1).find("k", &w));
  EXPECT_EQ(w.pointer(), "/a~1b/m~0n/1/k");
}

TEST(JsonDoc, ALeadingByteOrderMarkIsSkipped) {
  EXPECT_EQ(parse("\xEF\xBB\xBF {\"a\": 1}")->root().size(), 1u);
}

TEST(JsonDoc, RefusesWhatIsNotJson) {
  for (const char* bad : {"", " ", "{", "[1,]", "{\"a\":1,}", "{\"a\" 1}", "{a: 1}", "{'a': 1}", "01", "1.", ".5",
                          "+1", "-", "1e", "1e+", "0x10", "NaN", "Infinity", "tru", "nul", "[1] 2", "\"abc",
                          "\"\\x\"", "\"\\u12\"", "\"\\uZZZZ\"", "\"a\tb\"", "\"a\nb\"", "// c\n1", "[1 2]",
                          "{\"a\":1 \"b\":2}", "[\"\\ud800\"]", "[\"\\udc00\"]", "[\"\\ud800\\u0041\"]"})
    EXPECT_NE(refusal(bad).find("t.json: not valid JSON"), std::string::npos) << "accepted: " << bad;
}

TEST(JsonDoc, RefusesInvalidUtf8) {
  for (const char* bad : {"\"\xC0\x80\"", "\"\xC1\xBF\"", "\"\xE0\x80\xAF\"", "\"\xED\xA0\x80\"", "\"\xF4\x90\x80\x80\"",
                          "\"\xF5\x80\x80\x80\"", "\"\xFF\"", "\"\x80\"", "\"\xE2\x82\"", "\"\xC3\""})
    EXPECT_NE(refusal(bad).find("not valid JSON"), std::string::npos) << "accepted invalid UTF-8";
  EXPECT_EQ(refusal("\"\xF4\x8F\xBF\xBF \xEF\xBF\xBF \xED\x9F\xBF\""), "") << "U+10FFFF, U+FFFF, U+D7FF are valid";
}

TEST(JsonDoc, RefusesADuplicateKeyDeepNestingAndHugeNumbers) {
  EXPECT_NE(refusal(R"({"a": 1, "b": 2, "a": 3})").find("member 'a' twice"), std::string::npos);
  std::string many = "{";
  for (int i = 0; i < 40; ++i) many += "\"k" + std::to_string(i) + "\": 0, ";
  EXPECT_NE(refusal(many + "\"k7\": 1}").find("member 'k7' twice"), std::string::npos) << "the sorted check";
  EXPECT_EQ(refusal(std::string(JsonDoc::kMaxDepth, '[') + std::string(JsonDoc::kMaxDepth, ']')), "");
  EXPECT_NE(refusal(std::string(JsonDoc::kMaxDepth + 1, '[') + std::string(JsonDoc::kMaxDepth + 1, ']')).find("nested deeper"),
            std::string::npos);
  EXPECT_NE(refusal("[1e400]").find("out of a double's range"), std::string::npos);
}

TEST(JsonDoc, RefusalsNameLineAndColumn) {
  EXPECT_NE(refusal("{\n  \"a\": 1,\n  \"b\": ]\n}").find("t.json: not valid JSON: line 3, column 8: expected a value, found ']'"),
            std::string::npos)
      << refusal("{\n  \"a\": 1,\n  \"b\": ]\n}");
}

TEST(JsonReader, ComplaintsNameFileAndPointer) {
  auto d = parse(R"({"builds": [{"n": 9223372036854775808, "s": 3}], "o": {"k": "v"}})");
  JsonReader r(d->root());
  auto b = r.at("builds").at(size_t{0});
  auto what = [](auto f) {
    try {
      f();
    } catch (const RegistryError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(what([&] { b.at("n").int64(); }), "t.json: /builds/0/n: integer out of range");
  EXPECT_EQ(what([&] { b.at("s").str(); }), "t.json: /builds/0/s: expected a string, got number");
  EXPECT_EQ(what([&] { b.at("x"); }), "t.json: /builds/0: missing required member 'x'");
  EXPECT_EQ(what([&] { r.at("builds").at(size_t{1}); }), "t.json: /builds: expected at least 2 elements, got 1");
  EXPECT_EQ(what([&] { r.allow_only({"builds"}); }), "t.json: /: unknown member 'o'");
  std::string seen;
  r.at("o").each_member([&](const std::string& k, const JsonReader& v) { seen += k + "=" + v.str(); });
  EXPECT_EQ(seen, "k=v");
}

}  // namespace
}  // namespace cake
