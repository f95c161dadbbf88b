#include "report_file.h"

#include <cstdio>
#include <fstream>

#include "ort_api.h"

namespace optim {

std::string json_str(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

void write_file_atomically(const std::string& path, const std::string& contents, const char* option) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::trunc);
    if (!f) throw Error(std::string("cannot write ") + option + " '" + path + "'");
    f << contents;
    f.flush();
    if (!f) throw Error(std::string("cannot write ") + option + " '" + path + "'");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw Error(std::string("cannot write ") + option + " '" + path + "'");
  }
}

}  // namespace optim
