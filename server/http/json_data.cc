// SPDX-License-Identifier: Apache-2.0
// A SAX filter in front of the RapidJSON document: it hands every event to the document except
// those inside inputs[i].data, which it collects into JsonData.
#include "server/http/json_data.h"

#include <rapidjson/error/en.h>
#include <rapidjson/memorystream.h>
#include <rapidjson/reader.h>

#include <cstring>

#include "server/http/json_util.h"

namespace kiln::server::http::detail {

namespace {

class DataFilter {
 public:
  DataFilter(rapidjson::Document& doc, std::vector<JsonData>& data, int max_nesting)
      : doc_(doc), data_(data), max_nesting_(max_nesting) {}

  const std::string& error() const { return error_; }

  // Scalars.
  bool Null() { return scalar(JsonData::kOther, 0) || doc_.Null(); }
  bool Bool(bool b) { return scalar(JsonData::kBool, b) || doc_.Bool(b); }
  bool Int(int i) { return Int64(i); }
  bool Uint(unsigned u) { return Uint64(u); }
  bool Int64(int64_t i) {
    return scalar(i < 0 ? JsonData::kInt : JsonData::kUint, static_cast<uint64_t>(i)) ||
           doc_.Int64(i);
  }
  bool Uint64(uint64_t u) { return scalar(JsonData::kUint, u) || doc_.Uint64(u); }
  bool Double(double d) {
    uint64_t bits;
    std::memcpy(&bits, &d, sizeof(bits));
    return scalar(JsonData::kDouble, bits) || doc_.Double(d);
  }
  bool RawNumber(const char* s, rapidjson::SizeType n, bool copy) {
    return doc_.RawNumber(s, n, copy);  // not asked for (no kParseNumbersAsStringsFlag)
  }
  bool String(const char* s, rapidjson::SizeType n, bool copy) {
    if (diverting_) {
      if (skip_ == 0) current().add_string(s, n);
      return true;
    }
    if (at_data()) {
      begin_data().add_string(s, n);
      end_data();
      return doc_.Null();
    }
    value_started();
    return doc_.String(s, n, copy);
  }

  // Containers.
  bool StartObject() {
    if (diverting_) {
      if (skip_++ == 0) current().add(JsonData::kOther, 0);
      return true;
    }
    if (at_data()) {
      begin_data().add(JsonData::kOther, 0);
      skip_ = 1;
      return true;
    }
    value_started();
    frames_.push_back({true});
    return doc_.StartObject();
  }
  bool Key(const char* s, rapidjson::SizeType n, bool copy) {
    if (diverting_) return true;
    Frame& f = frames_.back();
    const std::string_view key(s, n);
    f.key_inputs = key == "inputs";
    f.key_data = key == "data";
    return doc_.Key(s, n, copy);
  }
  bool EndObject(rapidjson::SizeType members) {
    if (diverting_) {
      if (--skip_ == 0 && nest_ == 0) return finish_data();
      return true;
    }
    frames_.pop_back();
    return doc_.EndObject(members);
  }
  bool StartArray() {
    if (diverting_) {
      if (skip_ > 0) return true;
      if (++nest_ > max_nesting_ + 1) {
        error_ = fmt::format("data is nested deeper than {} arrays", max_nesting_);
        return false;
      }
      return true;
    }
    if (at_data()) {
      begin_data();
      nest_ = 1;
      return true;
    }
    value_started();
    frames_.push_back({false});
    return doc_.StartArray();
  }
  bool EndArray(rapidjson::SizeType elements) {
    if (diverting_) {
      if (skip_ > 0) return true;
      if (--nest_ == 0) return finish_data();
      return true;
    }
    frames_.pop_back();
    return doc_.EndArray(elements);
  }

 private:
  struct Frame {
    bool object;
    bool key_inputs = false;  // objects: the last key
    bool key_data = false;
    size_t elements = 0;  // arrays: the values begun so far
  };

  // A value begins inside the current frame (counts array elements).
  void value_started() {
    if (!frames_.empty() && !frames_.back().object) ++frames_.back().elements;
  }
  // Whether the value beginning now is inputs[i].data of the top-level object.
  bool at_data() const {
    return frames_.size() == 3 && frames_[0].object && frames_[0].key_inputs &&
           !frames_[1].object && frames_[2].object && frames_[2].key_data;
  }
  JsonData& begin_data() {
    const size_t input = frames_[1].elements - 1;
    if (data_.size() <= input) data_.resize(input + 1);
    data_[input] = JsonData();
    index_ = input;
    diverting_ = true;
    return data_[input];
  }
  void end_data() { diverting_ = false; }
  bool finish_data() {
    diverting_ = false;
    return doc_.Null();
  }
  JsonData& current() { return data_[index_]; }
  // Collects a scalar when it belongs to a data value; false when the document should take it.
  bool scalar(JsonData::Kind kind, uint64_t bits) {
    if (diverting_) {
      if (skip_ == 0) current().add(kind, bits);
      return true;
    }
    if (at_data()) {
      begin_data().add(kind, bits);
      end_data();
      doc_.Null();
      return true;
    }
    value_started();
    return false;
  }

  rapidjson::Document& doc_;
  std::vector<JsonData>& data_;
  const int max_nesting_;
  std::vector<Frame> frames_;
  bool diverting_ = false;
  int nest_ = 0;  // arrays open inside the data value
  int skip_ = 0;  // objects open inside the data value (their contents are not data)
  size_t index_ = 0;
  std::string error_;
};

}  // namespace

Status parse_request_json(std::string_view text, rapidjson::Document& doc,
                          std::vector<JsonData>& data, int max_nesting, std::string_view what) {
  DataFilter filter(doc, data, max_nesting);
  rapidjson::ParseResult result;
  auto parse = [&](rapidjson::Document&) {
    rapidjson::MemoryStream ms(text.data(), text.size());
    rapidjson::Reader reader;
    result = reader.Parse<kParseFlags>(ms, filter);
    return !result.IsError();
  };
  doc.Populate(parse);
  if (result.IsError()) {
    if (!filter.error().empty()) {
      return invalid_argument_error(fmt::format("{}: {}", what, filter.error()));
    }
    return invalid_argument_error(fmt::format("{} is not valid JSON: {} (at byte {})", what,
                                              rapidjson::GetParseError_En(result.Code()),
                                              result.Offset()));
  }
  return Status();
}

}  // namespace kiln::server::http::detail
