//===- CommandArgs.h - Option parsing for magic-trace commands --*- C++ -*-===//
//
// LLDB hands plugin commands a plain argv; this parses it the way LLDB's own
// commands parse theirs: short (-j, -o FILE) and long (--json, --out FILE,
// --out=FILE) options, "--" ends options, anything else is positional.
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_PLUGIN_COMMANDARGS_H
#define MAGIC_TRACE_PLUGIN_COMMANDARGS_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <map>
#include <string>
#include <vector>

namespace magic_trace::plugin {

struct OptionSpec {
  char shortName;       ///< 0 when the option has no short form.
  const char *longName; ///< Without the leading "--".
  bool takesValue;
  const char *valueName; ///< Shown in help, e.g. "FILE"; null for flags.
  const char *help;
};

class ParsedArgs {
public:
  bool has(llvm::StringRef longName) const {
    return values.count(longName.str()) != 0;
  }
  /// The value of an option, or `fallback` when it was not given.
  std::string get(llvm::StringRef longName, llvm::StringRef fallback) const {
    auto it = values.find(longName.str());
    return it == values.end() ? fallback.str() : it->second;
  }

  std::map<std::string, std::string> values;
  std::vector<std::string> positional;
};

/// Parses a null-terminated argv. Errors name the bad option and point to
/// `help magic-trace <command>`.
llvm::Expected<ParsedArgs> parseArgs(const char *const *argv,
                                     llvm::ArrayRef<OptionSpec> specs,
                                     llvm::StringRef commandName);

/// The "Options:" block of a command's help text.
std::string describeOptions(llvm::ArrayRef<OptionSpec> specs);

} // namespace magic_trace::plugin

#endif
