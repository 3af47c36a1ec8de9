//===- CommandArgs.cpp - Option parsing for magic-trace commands ----------===//
#include "CommandArgs.h"

#include "llvm/Support/raw_ostream.h"

namespace magic_trace::plugin {
namespace {

const OptionSpec *findLong(llvm::ArrayRef<OptionSpec> specs,
                           llvm::StringRef name) {
  for (const OptionSpec &spec : specs)
    if (name == spec.longName)
      return &spec;
  return nullptr;
}

const OptionSpec *findShort(llvm::ArrayRef<OptionSpec> specs, char name) {
  for (const OptionSpec &spec : specs)
    if (spec.shortName && spec.shortName == name)
      return &spec;
  return nullptr;
}

llvm::Error unknownOption(llvm::StringRef arg, llvm::StringRef command) {
  return llvm::createStringError(
      "unknown option '%s' (see 'help magic-trace %s')", arg.str().c_str(),
      command.str().c_str());
}

} // namespace

llvm::Expected<ParsedArgs> parseArgs(const char *const *argv,
                                     llvm::ArrayRef<OptionSpec> specs,
                                     llvm::StringRef commandName) {
  ParsedArgs parsed;
  bool optionsEnded = false;
  for (; argv && *argv; ++argv) {
    llvm::StringRef arg(*argv);
    if (optionsEnded || arg.size() < 2 || arg[0] != '-') {
      parsed.positional.push_back(arg.str());
      continue;
    }
    if (arg == "--") {
      optionsEnded = true;
      continue;
    }
    const OptionSpec *spec = nullptr;
    std::optional<std::string> inlineValue;
    if (arg.starts_with("--")) {
      auto [name, value] = arg.drop_front(2).split('=');
      spec = findLong(specs, name);
      if (arg.contains('='))
        inlineValue = value.str();
    } else {
      spec = findShort(specs, arg[1]);
      if (arg.size() > 2)
        inlineValue = arg.drop_front(2).str();
    }
    if (!spec)
      return unknownOption(arg, commandName);
    if (!spec->takesValue) {
      if (inlineValue)
        return llvm::createStringError(
            "option '--%s' takes no value (see 'help magic-trace %s')",
            spec->longName, commandName.str().c_str());
      parsed.values[spec->longName] = "";
      continue;
    }
    if (!inlineValue) {
      if (!argv[1])
        return llvm::createStringError(
            "option '--%s' needs a value %s (see 'help magic-trace %s')",
            spec->longName, spec->valueName, commandName.str().c_str());
      inlineValue = *++argv;
    }
    parsed.values[spec->longName] = *inlineValue;
  }
  return parsed;
}

std::string describeOptions(llvm::ArrayRef<OptionSpec> specs) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "\nOptions:\n";
  for (const OptionSpec &spec : specs) {
    std::string left = "  ";
    if (spec.shortName)
      left += std::string("-") + spec.shortName + ", ";
    left += std::string("--") + spec.longName;
    if (spec.takesValue)
      left += std::string(" ") + spec.valueName;
    os << left;
    os.indent(left.size() < 30 ? 30 - left.size() : 1);
    os << spec.help << "\n";
  }
  return text;
}

} // namespace magic_trace::plugin
