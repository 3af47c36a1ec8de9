//===- Version.cpp - libipt version at run time ---------------------------===//
#include "magic_trace/Libipt.h"

#include <intel-pt.h>

#include <string>

namespace magic_trace {

std::string libiptVersion() {
  pt_version version = pt_library_version();
  std::string text = std::to_string(version.major) + "." +
                     std::to_string(version.minor) + "." +
                     std::to_string(version.patch);
  if (version.ext && *version.ext)
    text += std::string("-") + version.ext;
  return text;
}

} // namespace magic_trace
