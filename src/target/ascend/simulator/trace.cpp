// Reports, the text summary and the Chrome/Perfetto trace of a simulation.
#include <cstdio>
#include <fstream>
#include <sstream>

#include "target/ascend/program_printer.h"
#include "target/ascend/simulator/simulator.h"
#include "tilewright/ir.h"

namespace tw::ascend::sim {

namespace {
std::string where(const ir::Span& s) {
  if (!s.known()) return "<unknown>";
  return (s.file.empty() ? std::string("<kernel>") : s.file) + ":" + std::to_string(s.line);
}
std::string json_escape(const std::string& s) {
  std::string o;
  for (char ch : s) {
    if (ch == '"' || ch == '\\') o += '\\', o += ch;
    else if (ch == '\n') o += "\\n";
    else if (static_cast<unsigned char>(ch) < 0x20) o += ' ';
    else o += ch;
  }
  return o;
}
}  // namespace

std::string Report::format() const {
  std::ostringstream os;
  ir::Span s = instrs.empty() ? ir::Span{} : instrs[0].span;
  os << where(s) << ": " << report_kind_name(kind) << ": " << message << "\n";
  for (size_t i = 0; i < instrs.size(); ++i) {
    const auto& in = instrs[i];
    os << "    " << (i == 0 ? "at   " : "with ") << where(in.span) << "  " << in.core << " cycle " << in.cycle << ": "
       << in.text << "\n";
  }
  return os.str();
}

bool Result::has(ReportKind k) const {
  for (const auto& r : reports)
    if (r.kind == k) return true;
  return false;
}

std::string Result::summary() const {
  std::ostringstream os;
  char buf[256];
  std::snprintf(buf, sizeof buf, "simulated %s kernel '%s': %d blocks on %d AIC + %d AIV\n",
                std::string(kernel_type_name(kernel_type)).c_str(), program ? program->name.c_str() : "?", blocks,
                aic_used, aiv_used);
  os << buf;
  std::snprintf(buf, sizeof buf, "  total %lld cycles = %.3f us at %.0f MHz; %lld instructions\n",
                static_cast<long long>(total_cycles), time_us, clock_mhz, static_cast<long long>(instructions));
  os << buf;
  for (int t = 0; t < 2; ++t) {
    if ((t == 0 ? aic_used : aiv_used) == 0) continue;
    os << "  " << (t == 0 ? "AIC" : "AIV") << " pipe busy:";
    for (int p = 0; p < kNumPipes; ++p) {
      if (busy_cycles[t][p] == 0) continue;
      std::snprintf(buf, sizeof buf, " %s %.1f%%", std::string(pipe_name(static_cast<Pipe>(p))).c_str(), busy_pct[t][p]);
      os << buf;
    }
    os << "\n";
  }
  std::snprintf(buf, sizeof buf,
                "  Cube utilisation %.1f%% of the chip's %d AICs (M busy %.1f%% of used AICs); %.2f TFLOP/s "
                "(simulated)\n",
                100 * cube_utilisation, chip_aic, 100 * cube_busy, tflops);
  os << buf;
  if (reports.empty()) os << "  checker: no problems found\n";
  else os << "  checker: " << reports.size() + dropped_reports << " problem(s)\n";
  for (const auto& r : reports) os << r.format();
  return os.str();
}

std::string Result::trace_json() const {
  std::ostringstream os;
  os << "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[";
  bool first = true;
  auto sep = [&]() {
    if (!first) os << ",\n";
    first = false;
  };
  for (size_t c = 0; c < core_names.size(); ++c) {
    sep();
    os << "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":" << c << ",\"args\":{\"name\":\"" << json_escape(core_names[c])
       << "\"}}";
    for (int p = 0; p < kNumPipes; ++p) {
      sep();
      os << "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":" << c << ",\"tid\":" << p << ",\"args\":{\"name\":\""
         << pipe_name(static_cast<Pipe>(p)) << "\"}}";
    }
  }
  char buf[64];
  for (const auto& e : trace) {
    sep();
    std::string name = e.instr ? std::string(instr_name(e.instr->op)) : "wait";
    os << "{\"name\":\"" << name << "\",\"cat\":\"" << pipe_name(static_cast<Pipe>(e.pipe)) << "\",\"ph\":\"X\",\"pid\":"
       << e.core << ",\"tid\":" << static_cast<int>(e.pipe);
    std::snprintf(buf, sizeof buf, ",\"ts\":%.4f,\"dur\":%.4f", e.start / clock_mhz, e.dur / clock_mhz);
    os << buf;
    if (e.instr && program) {
      os << ",\"args\":{\"instr\":\"" << json_escape(print_instr(*program, *e.instr, false)) << "\",\"line\":"
         << e.instr->span.line << ",\"cycle\":" << e.start << "}";
    }
    os << "}";
  }
  os << "]}\n";
  return os.str();
}

void Result::write_trace(const std::string& path) const {
  std::ofstream f(path);
  if (!f) throw ir::Error("cannot write the trace to '" + path + "'");
  f << trace_json();
}

}  // namespace tw::ascend::sim
