// --fix parser: items split on ',', each "key=value"; integers >= 1, switches on/off (also
// true/false, 1/0), enums in the plan file's spelling.
#include "sim/sweep/fixed_axes.hpp"

#include <cctype>
#include <charconv>
#include <climits>
#include <vector>

#include "src/common/error.hpp"

namespace mplan::sweep {

namespace {

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

const char* kKeys =
    "tp, cp, ep, etp, pp, vpp, dp, mbs, sp, tp_comm_overlap, recompute, dist_opt, fsdp, schedule, "
    "cp_comm_type, cp_a2a, overlap_p2p, offload_layers, offload_modules";

// An integer from `min` to INT32_MAX: a size (min 1) or offload_layers' count (min 0, none).
int64_t parse_int(const std::string& key, const std::string& value, const std::string& flag,
                  int64_t min = 1) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
  if (ec != std::errc() || end != value.data() + value.size() || v < min || v > INT32_MAX)
    throw Error(cat(flag, ": ", key, " must be an integer from ", min, " to ", INT32_MAX,
                    ", got \"", value, "\""));
  return v;
}

// offload_modules: "none" or module names joined by '+'.
uint32_t parse_modules(const std::string& key, const std::string& value, const std::string& flag) {
  if (value == "none") return 0;
  std::vector<std::string> names;
  size_t pos = 0;
  for (;;) {
    const size_t plus = value.find('+', pos);
    names.push_back(trim(value.substr(pos, plus == std::string::npos ? plus : plus - pos)));
    if (plus == std::string::npos) break;
    pos = plus + 1;
  }
  return offload_modules_from_names(names, cat(flag, ": ", key));
}

bool parse_switch(const std::string& key, const std::string& value, const std::string& flag) {
  if (value == "on" || value == "true" || value == "1") return true;
  if (value == "off" || value == "false" || value == "0") return false;
  throw Error(cat(flag, ": ", key, " must be on or off, got \"", value, "\""));
}

// fsdp: off, or one of Megatron-FSDP's sharding strategies.
std::optional<DpSharding> parse_fsdp(const std::string& key, const std::string& value,
                                     const std::string& flag) {
  if (value == "off") return std::nullopt;
  for (DpSharding d : {DpSharding::kNoShard, DpSharding::kOptim, DpSharding::kOptimGrads,
                       DpSharding::kOptimGradsParams})
    if (value == mplan::to_string(d)) return d;
  throw Error(cat(flag, ": ", key,
                  " must be off, no_shard, optim, optim_grads or optim_grads_params, got \"", value,
                  "\""));
}

template <class T>
void set_once(std::optional<T>& slot, T value, const std::string& key, const std::string& flag) {
  if (slot) throw Error(cat(flag, ": ", key, " is given twice"));
  slot = value;
}

}  // namespace

FixedAxes parse_fixed_axes(const std::string& text, const std::string& flag) {
  FixedAxes f;
  if (trim(text).empty()) return f;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    if (comma == std::string::npos) comma = text.size();
    const std::string item = trim(text.substr(pos, comma - pos));
    pos = comma + 1;
    const size_t eq = item.find('=');
    if (item.empty() || eq == std::string::npos)
      throw Error(cat(flag, ": expected key=value items separated by commas (keys: ", kKeys,
                      "), got \"", item, "\""));
    const std::string key = trim(item.substr(0, eq));
    const std::string value = trim(item.substr(eq + 1));
    if (key == "tp")
      set_once(f.tp, parse_int(key, value, flag), key, flag);
    else if (key == "cp")
      set_once(f.cp, parse_int(key, value, flag), key, flag);
    else if (key == "ep")
      set_once(f.ep, parse_int(key, value, flag), key, flag);
    else if (key == "etp")
      set_once(f.etp, parse_int(key, value, flag), key, flag);
    else if (key == "pp")
      set_once(f.pp, parse_int(key, value, flag), key, flag);
    else if (key == "vpp")
      set_once(f.vpp, parse_int(key, value, flag), key, flag);
    else if (key == "dp")
      set_once(f.dp, parse_int(key, value, flag), key, flag);
    else if (key == "mbs" || key == "micro_batch_size")
      set_once(f.micro_batch_size, parse_int(key, value, flag), std::string("mbs"), flag);
    else if (key == "sp" || key == "sequence_parallel")
      set_once(f.sequence_parallel, parse_switch(key, value, flag), std::string("sp"), flag);
    else if (key == "tp_comm_overlap")
      set_once(f.tp_comm_overlap, parse_switch(key, value, flag), key, flag);
    else if (key == "recompute")
      set_once(f.recompute, recompute_from_string(value, cat(flag, ": recompute")), key, flag);
    else if (key == "dist_opt" || key == "distributed_optimizer")
      set_once(f.distributed_optimizer, parse_switch(key, value, flag), std::string("dist_opt"),
               flag);
    else if (key == "fsdp" || key == "data_parallel_sharding_strategy")
      set_once(f.fsdp, parse_fsdp(key, value, flag), std::string("fsdp"), flag);
    else if (key == "schedule")
      set_once(f.schedule, schedule_kind_from_string(value, cat(flag, ": schedule")), key, flag);
    else if (key == "cp_comm_type")
      set_once(f.cp_comm_type, cp_comm_type_from_string(value, cat(flag, ": cp_comm_type")), key,
               flag);
    else if (key == "cp_a2a")
      set_once(f.cp_a2a, parse_int(key, value, flag), key, flag);
    else if (key == "overlap_p2p" || key == "overlap_p2p_comm")
      set_once(f.overlap_p2p, parse_switch(key, value, flag), std::string("overlap_p2p"), flag);
    else if (key == "offload_layers" || key == "cpu_offloading_num_layers")
      set_once(f.offload_layers, parse_int(key, value, flag, 0), std::string("offload_layers"),
               flag);
    else if (key == "offload_modules")
      set_once(f.offload_modules, parse_modules(key, value, flag), key, flag);
    else
      throw Error(cat(flag, ": unknown key \"", key, "\" (keys: ", kKeys, ")"));
    if (comma == text.size()) break;
  }
  if (f.cp_a2a && f.cp_comm_type && *f.cp_comm_type != CpCommType::kA2aP2p)
    throw Error(cat(flag, ": cp_a2a is the all-to-all size of cp_comm_type a2a+p2p, not of ",
                    mplan::to_string(*f.cp_comm_type)));
  if (f.fsdp && *f.fsdp && f.distributed_optimizer == false)
    throw Error(cat(flag, ": fsdp=", mplan::to_string(**f.fsdp),
                    " runs the distributed optimizer (Megatron-FSDP v1), not dist_opt=off"));
  if (f.tp_comm_overlap == true && f.sequence_parallel == false)
    throw Error(cat(flag,
                    ": tp_comm_overlap=on overlaps sequence parallelism's collectives, not "
                    "sp=off"));
  return f;
}

std::string to_string(const FixedAxes& f) {
  std::vector<std::string> items;
  auto size = [&](const char* k, const std::optional<int64_t>& v) {
    if (v) items.push_back(cat(k, "=", *v));
  };
  size("tp", f.tp);
  size("cp", f.cp);
  size("ep", f.ep);
  size("etp", f.etp);
  size("pp", f.pp);
  size("vpp", f.vpp);
  size("dp", f.dp);
  size("mbs", f.micro_batch_size);
  if (f.sequence_parallel) items.push_back(cat("sp=", *f.sequence_parallel ? "on" : "off"));
  if (f.tp_comm_overlap)
    items.push_back(cat("tp_comm_overlap=", *f.tp_comm_overlap ? "on" : "off"));
  if (f.recompute) items.push_back(cat("recompute=", mplan::to_string(*f.recompute)));
  if (f.distributed_optimizer)
    items.push_back(cat("dist_opt=", *f.distributed_optimizer ? "on" : "off"));
  if (f.fsdp) items.push_back(cat("fsdp=", *f.fsdp ? mplan::to_string(**f.fsdp) : "off"));
  if (f.schedule) items.push_back(cat("schedule=", mplan::to_string(*f.schedule)));
  if (f.cp_comm_type) items.push_back(cat("cp_comm_type=", mplan::to_string(*f.cp_comm_type)));
  size("cp_a2a", f.cp_a2a);
  if (f.overlap_p2p) items.push_back(cat("overlap_p2p=", *f.overlap_p2p ? "on" : "off"));
  if (f.offload_layers) items.push_back(cat("offload_layers=", *f.offload_layers));
  if (f.offload_modules) {
    std::string names;
    for (const std::string& m : offload_module_names(*f.offload_modules))
      names += (names.empty() ? "" : "+") + m;
    items.push_back(cat("offload_modules=", names.empty() ? "none" : names));
  }
  std::string out;
  for (const auto& i : items) out += (out.empty() ? "" : ",") + i;
  return out;
}

}  // namespace mplan::sweep
