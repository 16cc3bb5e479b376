#include "client/completion_command.h"

#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"

namespace trainctl::client {
namespace {

// Every name an option answers to: -o, --output.
std::vector<std::string> FlagNames(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::Option* opt : app.get_options()) {
    for (const std::string& s : opt->get_snames()) names.push_back("-" + s);
    for (const std::string& l : opt->get_lnames()) names.push_back("--" + l);
  }
  return names;
}

// Options that take a file name as their value.
bool TakesAFile(const CLI::Option* opt) {
  for (const std::string& l : opt->get_lnames()) {
    if (absl::StrContains(l, "cert") || absl::StrContains(l, "file") ||
        l == "csv" || l == "png" || l == "svg" || l == "out") {
      return true;
    }
  }
  return false;
}

// What a subcommand's positional argument is: a job id, a file, or neither.
std::string PositionalKind(const CLI::App& sub) {
  for (const CLI::Option* opt : sub.get_options()) {
    if (!opt->get_positional()) continue;
    const std::string name = opt->get_name();
    if (absl::StrContains(name, "JOB")) return "jobs";
    if (absl::StrContains(name, "FILE")) return "files";
  }
  return "";
}

}  // namespace

CLI::App* AddCompletionCommand(CLI::App& app, std::string* shell) {
  CLI::App* completion = app.add_subcommand(
      "completion", "Print a shell completion script (bash or zsh)");
  completion->add_option("SHELL", *shell, "bash or zsh")
      ->required()
      ->check(CLI::IsMember({"bash", "zsh"}));
  completion->footer(
      "\nExamples: load it in the current shell, or install it for every "
      "new one:\n"
      "  source <(trainctl completion bash)\n"
      "  trainctl completion bash > ~/.local/share/bash-completion/completions/trainctl\n"
      "  trainctl completion zsh > \"${fpath[1]}/_trainctl\"\n"
      "Job ids complete from `trainctl list -q` (the coordinator of your "
      "config or environment).");
  return completion;
}

int PrintCompletion(const CLI::App& app, const std::string& shell,
                    std::ostream& out) {
  std::vector<const CLI::App*> subs;
  for (const CLI::App* sub :
       app.get_subcommands([](const CLI::App*) { return true; })) {
    subs.push_back(sub);
  }
  std::vector<std::string> commands, value_flags, file_flags;
  for (const CLI::App* sub : subs) commands.push_back(sub->get_name());
  // Flags that take a value: the word after them is that value.
  auto collect = [&](const CLI::App& a) {
    for (const CLI::Option* opt : a.get_options()) {
      if (opt->get_positional() || opt->get_expected_min() == 0) continue;
      for (const std::string& l : opt->get_lnames()) {
        (TakesAFile(opt) ? file_flags : value_flags).push_back("--" + l);
      }
      for (const std::string& s : opt->get_snames()) {
        if (s == "o") continue;  // the global --output, or plot's --file
        (TakesAFile(opt) ? file_flags : value_flags).push_back("-" + s);
      }
    }
  };
  collect(app);
  for (const CLI::App* sub : subs) collect(*sub);

  if (shell == "zsh") {
    // zsh runs the bash function through its bash-completion layer.
    out << "#compdef trainctl\n"
           "autoload -U +X bashcompinit && bashcompinit\n";
  }
  out << "# " << shell << " completion for trainctl (trainctl completion "
      << shell << ")\n"
      << "# COMPREPLY=($(compgen ...)) rather than mapfile: zsh's bashcompinit\n"
      << "# has no mapfile.\n"
      << "# shellcheck disable=SC2207\n"
      << "_trainctl() {\n"
      << "  local cur=\"${COMP_WORDS[COMP_CWORD]}\"\n"
      << "  local prev=\"${COMP_WORDS[COMP_CWORD-1]}\"\n"
      << "  local global=\"" << absl::StrJoin(FlagNames(app), " ") << "\"\n"
      << "  local cmd=\"\" i\n"
      << "  for ((i = 1; i < COMP_CWORD; i++)); do\n"
      << "    case \"${COMP_WORDS[i]}\" in\n"
      << "      " << absl::StrJoin(commands, "|") << ") cmd=\"${COMP_WORDS[i]}\"; break ;;\n"
      << "    esac\n"
      << "  done\n"
      << "  case \"$prev\" in\n"
      << "    -o) if [ \"$cmd\" = plot ]; then COMPREPLY=($(compgen -f -- \"$cur\"));\n"
      << "        else COMPREPLY=($(compgen -W \"table json\" -- \"$cur\")); fi; return ;;\n"
      << "    --output) COMPREPLY=($(compgen -W \"table json\" -- \"$cur\")); return ;;\n";
  if (!file_flags.empty()) {
    out << "    " << absl::StrJoin(file_flags, "|")
        << ") COMPREPLY=($(compgen -f -- \"$cur\")); return ;;\n";
  }
  std::vector<std::string> other_values;
  for (const std::string& f : value_flags) {
    if (f != "--output") other_values.push_back(f);
  }
  if (!other_values.empty()) {
    out << "    " << absl::StrJoin(other_values, "|") << ") return ;;\n";
  }
  out << "  esac\n"
      << "  if [ -z \"$cmd\" ]; then\n"
      << "    COMPREPLY=($(compgen -W \"" << absl::StrJoin(commands, " ")
      << " $global\" -- \"$cur\"))\n"
      << "    return\n"
      << "  fi\n"
      << "  local opts=\"\" args=\"\"\n"
      << "  case \"$cmd\" in\n";
  for (const CLI::App* sub : subs) {
    out << "    " << sub->get_name() << ") opts=\""
        << absl::StrJoin(FlagNames(*sub), " ") << "\"; args=\""
        << PositionalKind(*sub) << "\" ;;\n";
  }
  out << "  esac\n"
      << "  if [[ \"$cur\" == -* ]]; then\n"
      << "    COMPREPLY=($(compgen -W \"$opts $global\" -- \"$cur\"))\n"
      << "  elif [ \"$args\" = jobs ]; then\n"
      << "    COMPREPLY=($(compgen -W \"$(trainctl list --all -q 2>/dev/null)\" -- \"$cur\"))\n"
      << "  elif [ \"$args\" = files ]; then\n"
      << "    COMPREPLY=($(compgen -f -- \"$cur\"))\n"
      << "  elif [ \"$cmd\" = completion ]; then\n"
      << "    COMPREPLY=($(compgen -W \"bash zsh\" -- \"$cur\"))\n"
      << "  fi\n"
      << "}\n"
      << "complete -F _trainctl trainctl\n";
  return 0;
}

}  // namespace trainctl::client
