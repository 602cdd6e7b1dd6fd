// The safetensors reader and writer: every dtype round-trips; a file that
// Python's struct and json wrote reads back, and Giant's file passes the
// same Python's reading of the format (support/safetensors_by_python.py);
// every malformed file is a FormatError naming the file and the field.
// verify_checkpoint finds a changed byte, a missing file and a missing
// piece, each naming its file.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <initializer_list>
#include <limits>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "checkpoint/support/format_fixture.h"
#include "giant/base/crc32c.h"
#include "giant/checkpoint/manifest.h"
#include "giant/checkpoint/safetensors.h"
#include "support/error_message.h"

namespace giant::checkpoint {
namespace {

using giant::test::error_message;
using giant::test::names_all;

namespace fs = std::filesystem;
using test::read_bytes;
using test::safetensors_bytes;
using test::TempDir;
using test::write_bytes;

const std::vector<DType> kEveryDType = {DType::f64, DType::f32, DType::f16, DType::bf16, DType::i64,
                                        DType::i32, DType::i16, DType::i8,  DType::u8,   DType::boolean};

// parse_safetensors_header's error for a header text in a file whose data
// section has data_bytes bytes.
std::string header_error(const std::string& header, uint64_t data_bytes) {
  return error_message<FormatError>(
      [&] { parse_safetensors_header(header, 8 + header.size() + data_bytes, "/ckpt/rank_00007.safetensors"); });
}

std::string entry(const std::string& dtype, const std::string& shape, const std::string& offsets) {
  return "{\"dtype\":\"" + dtype + "\",\"shape\":" + shape + ",\"data_offsets\":" + offsets + "}";
}

TEST(DType, NamesSizesAndParsingAgree) {
  const std::map<DType, std::pair<std::string, size_t>> expected = {
      {DType::f64, {"F64", 8}}, {DType::f32, {"F32", 4}},  {DType::f16, {"F16", 2}}, {DType::bf16, {"BF16", 2}},
      {DType::i64, {"I64", 8}}, {DType::i32, {"I32", 4}},  {DType::i16, {"I16", 2}}, {DType::i8, {"I8", 1}},
      {DType::u8, {"U8", 1}},   {DType::boolean, {"BOOL", 1}}};
  ASSERT_EQ(expected.size(), kEveryDType.size());
  for (const DType dtype : kEveryDType) {
    EXPECT_EQ(dtype_name(dtype), expected.at(dtype).first);
    EXPECT_EQ(dtype_size(dtype), expected.at(dtype).second) << dtype_name(dtype);
    EXPECT_EQ(parse_dtype(dtype_name(dtype)), dtype);
  }
  EXPECT_EQ(parse_dtype("F128"), std::nullopt);
  EXPECT_EQ(parse_dtype("f32"), std::nullopt);  // the format's names are upper case
  EXPECT_EQ(parse_dtype(""), std::nullopt);
}

TEST(Safetensors, EveryDTypeRoundTripsWithItsShapeBytesAndMetadata) {
  TempDir dir;
  std::mt19937 random(7);
  std::vector<TensorToWrite> tensors;
  std::vector<std::string> data;
  data.reserve(kEveryDType.size() + 2);
  const std::vector<std::vector<int64_t>> shapes = {{3, 5}, {7}, {2, 1, 3}, {1}};
  for (size_t i = 0; i < kEveryDType.size(); ++i) {
    const auto& shape = shapes[i % shapes.size()];
    std::string& bytes = data.emplace_back(test::elements_of(shape) * dtype_size(kEveryDType[i]), '\0');
    for (char& b : bytes) b = static_cast<char>(random());
    if (kEveryDType[i] == DType::boolean) {
      for (char& b : bytes) b &= 1;
    }
    tensors.push_back({std::string("t") + std::to_string(i) + "/" + dtype_name(kEveryDType[i]), kEveryDType[i],
                       shape, bytes.data()});
  }
  data.emplace_back(8, '\x5a');
  tensors.push_back({"scalar", DType::f64, {}, data.back().data()});  // rank 0: one element
  tensors.push_back({"empty", DType::f32, {0, 4}, nullptr});          // no elements, no bytes
  const std::map<std::string, std::string> metadata = {{"format", "pt"}, {"giant", "1 \"quoted\" \n"}};
  const auto path = dir.path() / "all.safetensors";
  const WrittenFile written = write_safetensors(path, tensors, metadata);

  const std::string file = read_bytes(path);
  EXPECT_EQ(written.bytes, file.size());
  EXPECT_EQ(written.crc32c, crc32c(file));
  EXPECT_EQ(file_crc32c(path), written.crc32c);

  const SafetensorsReader reader(path);
  EXPECT_EQ(reader.file_size(), file.size());
  EXPECT_EQ(reader.path(), path);
  const SafetensorsHeader& header = reader.header();
  EXPECT_EQ(header.data_offset % 8, 0u) << "the header is padded to a multiple of 8";
  EXPECT_EQ(header.metadata, metadata);
  ASSERT_EQ(header.tensors.size(), tensors.size());
  uint64_t position = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorInfo& info = header.tensors[i];
    EXPECT_EQ(info.name, tensors[i].name) << "in the order written";
    EXPECT_EQ(info.dtype, tensors[i].dtype) << info.name;
    EXPECT_EQ(info.shape, tensors[i].shape) << info.name;
    EXPECT_EQ(info.begin, position) << info.name;
    EXPECT_EQ(info.elements(), test::elements_of(tensors[i].shape)) << info.name;
    EXPECT_EQ(info.bytes(), info.elements() * dtype_size(info.dtype)) << info.name;
    position = info.end;
    EXPECT_EQ(header.find(info.name), &info);
    std::string back(info.bytes(), '\0');
    reader.read(info, back.data());
    if (info.bytes() > 0) {
      EXPECT_EQ(std::memcmp(back.data(), tensors[i].data, info.bytes()), 0) << info.name;
      EXPECT_EQ(file.substr(header.data_offset + info.begin, info.bytes()), back) << info.name;
    }
  }
  EXPECT_EQ(header.data_offset + position, file.size());
  EXPECT_EQ(header.find("absent"), nullptr);
}

TEST(Safetensors, ReadsAPartOfATensorAndRefusesARangeOutsideIt) {
  TempDir dir;
  std::vector<float> values(24);
  for (size_t i = 0; i < values.size(); ++i) values[i] = 0.5f * static_cast<float>(i);
  const auto path = dir.path() / "part.safetensors";
  write_safetensors(path, {{"a", DType::f32, {4, 6}, values.data()}, {"b", DType::f32, {2}, values.data()}});
  const SafetensorsReader reader(path);
  std::vector<float> row(6);
  reader.read("a", row.data(), 2 * 6 * sizeof(float), 6 * sizeof(float));
  EXPECT_EQ(row, std::vector<float>(values.begin() + 12, values.begin() + 18));
  const std::string past = error_message<FormatError>([&] { reader.read("a", row.data(), 20 * sizeof(float), 6 * sizeof(float)); });
  EXPECT_TRUE(names_all(past, {path.string(), "a"}));
  // An offset so large that offset + bytes wraps around.
  EXPECT_TRUE(names_all(error_message<FormatError>([&] { reader.read("a", row.data(), ~uint64_t{0} - 3, 8); }), {"a"}));
  EXPECT_TRUE(names_all(error_message<FormatError>([&] { reader.read("c", row.data(), 0, 4); }), {path.string(), "c"}));
}

TEST(Safetensors, MovedReaderStillReads) {
  TempDir dir;
  const int64_t value = -42;
  const auto path = dir.path() / "one.safetensors";
  write_safetensors(path, {{"v", DType::i64, {1}, &value}});
  SafetensorsReader first(path);
  SafetensorsReader second(std::move(first));
  SafetensorsReader third(path);
  third = std::move(second);
  int64_t back = 0;
  third.read(*third.header().find("v"), &back);
  EXPECT_EQ(back, value);
}

TEST(Safetensors, AFileWrittenByPythonReadsBack) {
  TempDir dir;
  const auto path = dir.path() / "python.safetensors";
  const auto made = test::run_command("/usr/bin/python3 " + std::string(GIANT_SOURCE_DIR) +
                                      "/tests/checkpoint/support/safetensors_by_python.py write " + path.string());
  ASSERT_EQ(made.status, 0) << made.output;
  const SafetensorsReader reader(path);
  const SafetensorsHeader& header = reader.header();
  EXPECT_EQ(header.metadata, (std::map<std::string, std::string>{{"format", "pt"}, {"written_by", "python"}}));
  EXPECT_NE(header.data_offset % 8, 0u) << "Python's header is deliberately not padded";
  std::vector<std::string> names;
  for (const auto& t : header.tensors) names.push_back(t.name);
  EXPECT_EQ(names, (std::vector<std::string>{"weights/w", "ids", "half", "brain", "mask", "bytes", "small", "shorts",
                                             "ints", "scalar", "empty"}))
      << "in data order, not the header's";
  auto bytes_of = [&](const std::string& name) {
    const TensorInfo* info = header.find(name);
    EXPECT_NE(info, nullptr) << name;
    if (info == nullptr) return std::string();
    std::string bytes(info->bytes(), '\0');
    reader.read(*info, bytes.data());
    return bytes;
  };
  auto as_bytes = [](const auto& values) {
    return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(values[0]));
  };
  const TensorInfo& w = *header.find("weights/w");
  EXPECT_EQ(w.dtype, DType::f32);
  EXPECT_EQ(w.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(bytes_of("weights/w"), as_bytes(std::vector<float>{-1.5f, 0.25f, 3.0f, 1024.0f, -0.0f, 65504.0f}));
  EXPECT_EQ(bytes_of("ids"), as_bytes(std::vector<int64_t>{-(int64_t{1} << 40), 0, (int64_t{1} << 62) + 1}));
  EXPECT_EQ(bytes_of("half"), as_bytes(std::vector<uint16_t>{0x3c00, 0xc100}));
  EXPECT_EQ(bytes_of("brain"), as_bytes(std::vector<uint16_t>{0x3f80, 0xc020, 0x7f80}));
  EXPECT_EQ(bytes_of("mask"), std::string("\1\0\0\1", 4));
  EXPECT_EQ(bytes_of("bytes"), std::string("\x00\x01\x7f\x80\xff", 5));
  EXPECT_EQ(bytes_of("small"), as_bytes(std::vector<int8_t>{-128, 127}));
  EXPECT_EQ(bytes_of("shorts"), as_bytes(std::vector<int16_t>{-32768, 32767}));
  EXPECT_EQ(bytes_of("ints"), as_bytes(std::vector<int32_t>{std::numeric_limits<int32_t>::min(), 2147483647}));
  EXPECT_EQ(header.find("scalar")->shape, std::vector<int64_t>{});
  EXPECT_EQ(bytes_of("scalar"), as_bytes(std::vector<double>{3.141592653589793}));
  EXPECT_EQ(header.find("empty")->shape, (std::vector<int64_t>{0, 4}));
  EXPECT_EQ(header.find("empty")->bytes(), 0u);
}

TEST(Safetensors, GiantsFileIsReadByPythonAsWritten) {
  TempDir dir;
  const std::vector<double> f64 = {0.1, -2.0};
  const std::vector<float> f32 = {0.5f, -1.25f, 3.0f, 1024.0f, 0.0f, -0.0f};
  const std::vector<uint16_t> f16 = {0x3c00, 0xc100, 0x7c00};   // 1, -2.5, inf
  const std::vector<uint16_t> bf16 = {0x3f80, 0xc020, 0x4049};  // 1, -2.5, 3.140625
  const std::vector<int64_t> i64 = {std::numeric_limits<int64_t>::min(), 0, std::numeric_limits<int64_t>::max()};
  const std::vector<int32_t> i32 = {-7, 123456789};
  const std::vector<int16_t> i16 = {-300, 300};
  const std::vector<int8_t> i8 = {-5, 5};
  const std::vector<uint8_t> u8 = {0, 200, 255};
  const std::vector<uint8_t> flags = {1, 0};
  const auto path = dir.path() / "giant.safetensors";
  write_safetensors(path,
                    {{"f64", DType::f64, {2}, f64.data()},
                     {"model/block.0.w", DType::f32, {2, 3}, f32.data()},
                     {"f16", DType::f16, {3}, f16.data()},
                     {"bf16", DType::bf16, {3, 1}, bf16.data()},
                     {"i64", DType::i64, {3}, i64.data()},
                     {"i32", DType::i32, {2}, i32.data()},
                     {"i16", DType::i16, {2}, i16.data()},
                     {"i8", DType::i8, {2}, i8.data()},
                     {"u8", DType::u8, {3}, u8.data()},
                     {"bool", DType::boolean, {2}, flags.data()},
                     {"empty", DType::f32, {0}, nullptr}},
                    {{"step", "12"}});
  const auto read = test::run_command("/usr/bin/python3 " + std::string(GIANT_SOURCE_DIR) +
                                      "/tests/checkpoint/support/safetensors_by_python.py read " + path.string());
  ASSERT_EQ(read.status, 0) << read.output;
  const SafetensorsReader reader(path);
  const std::string expected = "data_offset " + std::to_string(reader.header().data_offset) +
                               "\n"
                               "meta step 12\n"
                               "tensor f64 F64 [2] 0.1 -2.0\n"
                               "tensor model/block.0.w F32 [2,3] 0.5 -1.25 3.0 1024.0 0.0 -0.0\n"
                               "tensor f16 F16 [3] 1.0 -2.5 inf\n"
                               "tensor bf16 BF16 [3,1] 1.0 -2.5 3.140625\n"
                               "tensor i64 I64 [3] -9223372036854775808 0 9223372036854775807\n"
                               "tensor i32 I32 [2] -7 123456789\n"
                               "tensor i16 I16 [2] -300 300\n"
                               "tensor i8 I8 [2] -5 5\n"
                               "tensor u8 U8 [3] 0 200 255\n"
                               "tensor bool BOOL [2] 1 0\n"
                               "tensor empty F32 [0]\n";
  EXPECT_EQ(read.output, expected);
}

TEST(Safetensors, WriteFailuresNameTheFile) {
  const float value = 1;
  auto error_of = [](auto&& f) -> std::string {
    try {
      f();
    } catch (const Error& e) {
      return e.what();
    }
    return "(no error)";
  };
  const std::string no_folder = "/nonexistent-giant-folder/rank_00000.safetensors";
  const std::string missing = error_of([&] { write_safetensors(no_folder, {{"v", DType::f32, {1}, &value}}); });
  EXPECT_TRUE(names_all(missing, {no_folder}));
  // The disk is full: /dev/full fails every write with ENOSPC.
  std::vector<float> big(1 << 16, 1.0f);
  const std::string full =
      error_of([&] { write_safetensors("/dev/full", {{"v", DType::f32, {1 << 16}, big.data()}}); });
  EXPECT_TRUE(names_all(full, {"/dev/full", "space"}));
}

// Each malformed file: a FormatError naming the file and what is wrong.
class MalformedFile : public ::testing::Test {
 protected:
  // A valid file of two f32 tensors, "first" [4] and "second" [2, 2].
  fs::path valid_file() {
    const std::vector<float> values = {1, 2, 3, 4, 5, 6, 7, 8};
    const auto path = dir_.path() / "rank_00003.safetensors";
    write_safetensors(path, {{"first", DType::f32, {4}, values.data()}, {"second", DType::f32, {2, 2}, values.data()}});
    return path;
  }
  std::string open_error(const fs::path& path) {
    return error_message<FormatError>([&] { SafetensorsReader reader(path); });
  }
  TempDir dir_;
};

TEST_F(MalformedFile, MissingFile) {
  const auto path = dir_.path() / "absent.safetensors";
  EXPECT_TRUE(names_all(open_error(path), {path.string()}));
}

TEST_F(MalformedFile, TruncatedData) {
  const auto path = valid_file();
  fs::resize_file(path, fs::file_size(path) - 3);
  EXPECT_TRUE(names_all(open_error(path), {path.string(), "second"}));
}

TEST_F(MalformedFile, TruncatedInTheHeader) {
  const auto path = valid_file();
  fs::resize_file(path, 20);
  EXPECT_TRUE(names_all(open_error(path), {path.string(), "header"}));
  fs::resize_file(path, 5);  // not even the length
  EXPECT_TRUE(names_all(open_error(path), {path.string(), "header"}));
  fs::resize_file(path, 0);
  EXPECT_TRUE(names_all(open_error(path), {path.string()}));
}

TEST_F(MalformedFile, FlippedHeaderByte) {
  const auto path = valid_file();
  std::string bytes = read_bytes(path);
  bytes[8] ^= 0x01;  // '{' becomes 'z': no longer a JSON object
  write_bytes(path, bytes);
  EXPECT_TRUE(names_all(open_error(path), {path.string(), "header"}));
}

TEST_F(MalformedFile, FlippedDataOffsetDigit) {
  const auto path = valid_file();
  std::string bytes = read_bytes(path);
  const size_t at = bytes.find("16");  // first's end: 16 bytes
  ASSERT_NE(at, std::string::npos);
  bytes[at + 1] = '4';  // 14: not 4 x 4 bytes
  write_bytes(path, bytes);
  EXPECT_TRUE(names_all(open_error(path), {path.string(), "first"}));
}

TEST_F(MalformedFile, BadHeaderLength) {
  const auto path = valid_file();
  const std::string bytes = read_bytes(path);
  for (const uint64_t length : {uint64_t{0}, uint64_t{bytes.size()}, uint64_t{bytes.size() - 8 + 1},
                                kMaxHeaderBytes + 1, ~uint64_t{0}, uint64_t{1} << 63}) {
    std::string changed = bytes;
    for (int i = 0; i < 8; ++i) changed[i] = static_cast<char>((length >> (8 * i)) & 0xff);
    write_bytes(path, changed);
    EXPECT_TRUE(names_all(open_error(path), {path.string(), "header"})) << "header length " << length;
  }
}

TEST(SafetensorsHeader, OverlappingOffsets) {
  const std::string header = "{\"a\":" + entry("F32", "[2]", "[0,8]") + ",\"b\":" + entry("F32", "[2]", "[4,12]") + "}";
  EXPECT_TRUE(names_all(header_error(header, 12), {"rank_00007.safetensors", "overlap"}));
}

TEST(SafetensorsHeader, WrongByteCount) {
  const std::string header = "{\"a\":" + entry("F32", "[2,2]", "[0,12]") + "}";
  EXPECT_TRUE(names_all(header_error(header, 12), {"rank_00007.safetensors", "a"}));
}

TEST(SafetensorsHeader, UnknownDType) {
  const std::string header = "{\"a\":" + entry("F128", "[2]", "[0,32]") + "}";
  EXPECT_TRUE(names_all(header_error(header, 32), {"rank_00007.safetensors", "a", "F128"}));
}

TEST(SafetensorsHeader, OffsetsOutsideTheDataSection) {
  for (const std::string& offsets : {std::string("[8,16]"), std::string("[0,18446744073709551615]"),
                                     std::string("[18446744073709551608,0]"), std::string("[16,8]")}) {
    const std::string header = "{\"a\":" + entry("F32", "[2]", offsets) + "}";
    EXPECT_TRUE(names_all(header_error(header, 8), {"rank_00007.safetensors", "a"})) << offsets;
  }
}

TEST(SafetensorsHeader, BadShapes) {
  for (const std::string& shape :
       {std::string("[-1]"), std::string("[4294967296,4294967296,4294967296]"), std::string("[1.5]"),
        std::string("\"2\""), std::string("[9223372036854775807,2]"), std::string("[18446744073709551615]")}) {
    const std::string header = "{\"a\":" + entry("F32", shape, "[0,8]") + "}";
    EXPECT_TRUE(names_all(header_error(header, 8), {"rank_00007.safetensors", "a"})) << shape;
  }
}

TEST(SafetensorsHeader, BadStructure) {
  const std::string ok = entry("F32", "[2]", "[0,8]");
  for (const std::string& header : {
           std::string(""), std::string("[]"), std::string("{\"a\":3}"), std::string("{\"a\":" + ok),
           std::string("{\"a\":{\"shape\":[2],\"data_offsets\":[0,8]}}"),           // no dtype
           std::string("{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,8]}}"),       // no shape
           std::string("{\"a\":{\"dtype\":\"F32\",\"shape\":[2]}}"),                 // no offsets
           std::string("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0]}}"),
           std::string("{\"a\":{\"dtype\":7,\"shape\":[2],\"data_offsets\":[0,8]}}"),
           std::string("{\"__metadata__\":{\"k\":1},\"a\":" + ok + "}"),             // a number, not a string
           std::string("{\"__metadata__\":[],\"a\":" + ok + "}"),
           // The same name twice: whichever entry is kept, the other's bytes are a hole.
           std::string("{\"a\":" + ok + ",\"a\":" + entry("F32", "[2]", "[8,16]") + "}"),
       }) {
    EXPECT_TRUE(names_all(header_error(header, 8), {"rank_00007.safetensors"})) << header;
  }
}

TEST(SafetensorsHeader, DeepNestingIsAnErrorNotACrash) {
  const size_t depth = 1 << 20;  // a megabyte of brackets
  const std::string arrays = "{\"a\":" + std::string(depth, '[') + std::string(depth, ']') + "}";
  EXPECT_TRUE(names_all(header_error(arrays, 0), {"rank_00007.safetensors", "a"}));
  std::string objects;
  for (size_t i = 0; i < depth / 8; ++i) objects += "{\"a\":";
  EXPECT_TRUE(names_all(header_error(objects + "1" + std::string(depth / 8, '}'), 0), {"rank_00007.safetensors"}));
}

TEST(SafetensorsHeader, AcceptsPaddingEmptyTensorsAndNoTensors) {
  const std::string header =
      "{\"e\":" + entry("F32", "[0,3]", "[0,0]") + ",\"s\":" + entry("F64", "[]", "[0,8]") + "}    ";
  const auto parsed = parse_safetensors_header(header, 8 + header.size() + 8, "f");
  ASSERT_EQ(parsed.tensors.size(), 2u);
  EXPECT_EQ(parsed.find("s")->elements(), 1);
  EXPECT_EQ(parsed.find("e")->elements(), 0);
  EXPECT_EQ(parse_safetensors_header("{}", 10, "f").tensors.size(), 0u);
}

// The fixture checkpoint (support/format_fixture.h) under verify_checkpoint.
class Verify : public ::testing::Test {
 protected:
  void SetUp() override { manifest_ = test::write_fixture_checkpoint(dir_.path()); }
  std::vector<std::string> problems(size_t first = 0, size_t stride = 1) const {
    return verify_checkpoint(dir_.path(), manifest_, first, stride);
  }
  fs::path file(int rank) const { return dir_.path() / ("rank_0000" + std::to_string(rank) + ".safetensors"); }
  std::string joined(const std::vector<std::string>& lines) const {
    std::string text;
    for (const auto& line : lines) text += line + "\n";
    return text;
  }
  TempDir dir_;
  Manifest manifest_;
};

TEST_F(Verify, AGoodCheckpointHasNoProblemsAndExtraFilesAreNone) {
  EXPECT_EQ(joined(problems()), "");
  write_bytes(dir_.path() / "notes.txt", "not in the manifest");
  write_bytes(dir_.path() / "rank_00009.safetensors", "junk");
  EXPECT_EQ(joined(problems()), "");
}

TEST_F(Verify, AFlippedDataByteIsAChecksumProblemOfThatFile) {
  std::string bytes = read_bytes(file(1));
  bytes[bytes.size() - 5] ^= 0x10;  // data: the header still parses
  write_bytes(file(1), bytes);
  const auto found = problems();
  ASSERT_EQ(found.size(), 1u) << joined(found);
  EXPECT_TRUE(names_all(found[0], {file(1).string(), "CRC"}));
}

TEST_F(Verify, AMissingFileIsNamed) {
  fs::remove(file(0));
  const auto found = problems();
  ASSERT_EQ(found.size(), 1u) << joined(found);
  EXPECT_TRUE(names_all(found[0], {file(0).string(), "missing"}));
}

TEST_F(Verify, ATruncatedFileIsNamed) {
  fs::resize_file(file(0), fs::file_size(file(0)) - 4);
  const auto found = problems();
  ASSERT_GE(found.size(), 1u);
  EXPECT_TRUE(names_all(found[0], {file(0).string(), "bytes"}));
}

TEST_F(Verify, APieceMissingFromItsFileOrOfAnotherShapeOrDTypeIsNamed) {
  // The file rewritten without the norm's piece and with rng/0 as i8 [4,4];
  // the manifest updated to the new file's size and checksum.
  const std::vector<float> wte(64, 0.5f);
  const std::vector<uint8_t> rng(16, 3);
  const WrittenFile written = write_safetensors(
      file(0), {{"model/embedding.wte.weight@0,0", DType::f32, {8, 8}, wte.data()},
                {"rng/0@0", DType::i8, {4, 4}, rng.data()}});
  for (auto& f : manifest_.files) {
    if (f.name == "rank_00000.safetensors") f = {f.name, written.bytes, written.crc32c};
  }
  const std::string found = joined(problems());
  EXPECT_TRUE(names_all(found, {file(0).string() + ": ", "model/final_norm.weight@0", "model/final_norm.weight"}));
  EXPECT_TRUE(names_all(found, {"rng/0@0", "I8", "U8", "[4,4]", "[16]"}));
  EXPECT_EQ(found.find(file(1).string()), std::string::npos) << found;
}

TEST_F(Verify, RanksShareTheFilesByStride) {
  fs::remove(file(0));
  fs::remove(file(1));
  EXPECT_EQ(problems(0, 1).size(), 2u);
  const auto of_first = problems(0, 2), of_second = problems(1, 2);
  ASSERT_EQ(of_first.size(), 1u);
  ASSERT_EQ(of_second.size(), 1u);
  EXPECT_TRUE(names_all(of_first[0], {file(0).string()}));
  EXPECT_TRUE(names_all(of_second[0], {file(1).string()}));
  EXPECT_EQ(problems(2, 3).size(), 0u) << "no third file";
}

TEST_F(Verify, PiecesInAnUnlistedFileAreAProblem) {
  manifest_.files.erase(manifest_.files.begin() + 1);  // rank_00001 no longer listed
  const auto found = problems();
  ASSERT_EQ(found.size(), 1u) << joined(found);
  EXPECT_TRUE(names_all(found[0], {file(1).string()}));
  EXPECT_EQ(problems(1, 2).size(), 0u) << "reported once, by the first of the ranks sharing the work";
}

TEST_F(Verify, AnImpossibleShareIsACallersMistake) {
  EXPECT_THROW(problems(2, 2), Error);
  EXPECT_THROW(problems(0, 0), Error);
}

}  // namespace
}  // namespace giant::checkpoint
