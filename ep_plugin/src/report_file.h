// The JSON files OptimEP writes on request (EP options `placement_report`, `profile`): string quoting
// and a write that a reader never sees half done.
#pragma once

#include <string>

namespace optim {

// s as a JSON string literal, quotes included.
std::string json_str(const std::string& s);

// Writes contents to path.tmp, then renames it over path. Throws Error naming `option` on failure.
void write_file_atomically(const std::string& path, const std::string& contents, const char* option);

}  // namespace optim
