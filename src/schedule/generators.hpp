// The schedule generators behind make_schedule(), one file each. They take a spec that passed
// check_spec() and follow Megatron-LM's order of compute and p2p calls (see each .cpp).
#pragma once

#include "src/schedule/schedule.hpp"

namespace mplan {

Schedule make_gpipe_schedule(const ScheduleSpec& spec);        // gpipe.cpp
Schedule make_1f1b_schedule(const ScheduleSpec& spec);         // one_f_one_b.cpp
Schedule make_zb_h1_schedule(const ScheduleSpec& spec);        // one_f_one_b.cpp
Schedule make_interleaved_schedule(const ScheduleSpec& spec);  // interleaved.cpp

}  // namespace mplan
