// SharedLedger's admission queue (Note [Admission by plan], shared_ledger.hpp).
#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "memory/shared_ledger.hpp"
#include "memory/shared_ledger_layout.hpp"

namespace memtrain::memory {

namespace {

Member* ticket_of(SharedLedger::Slot& s) {
  for (Member& m : s.members) {
    if (m.pid != 0 && m.ticket != 0) return &m;
  }
  return nullptr;
}

// Effective priority: one level more for every aging period waited.
std::int64_t effective_priority(const SharedLedger::Slot& s, std::uint64_t now) {
  if (s.aging_s == 0 || now <= s.waiting_since_ns) return s.priority;
  return s.priority + static_cast<std::int64_t>((now - s.waiting_since_ns) / (s.aging_s * 1000000000ull));
}

}  // namespace

std::size_t SharedLedger::committed_locked() const {
  std::size_t committed = 0;
  for (const Slot& s : layout_->slots) {
    if (is_active(s)) committed += footprint(s.in_use(), s.reservation);
  }
  return committed;
}

JobId SharedLedger::enqueue(const AdmissionRequest& r) {
  if (r.key.empty()) throw std::invalid_argument("admission of job '" + r.name + "': the job needs a key");
  if (r.floor_bytes > r.need_bytes) {
    throw std::invalid_argument("admission of job '" + r.name + "': floor " + std::to_string(r.floor_bytes) +
                                " bytes above its need " + std::to_string(r.need_bytes) + "; expected floor <= need");
  }
  const std::string key = stored_key(r.key);
  LockGuard guard(*this);
  reclaim_dead_locked();
  Slot* free_slot = nullptr;
  for (Slot& s : layout_->slots) {
    if (is_active(s) && key == s.key) {
      throw std::invalid_argument("job '" + r.name + "' (" + r.key + ") asks for admission on ledger '" + device_ +
                                  "', where a job with its key is already queued or running (pid " +
                                  std::to_string(s.members[0].pid) + "); expected one run per run directory");
    }
    if (!is_active(s) && !free_slot) free_slot = &s;
  }
  if (!free_slot) {
    throw std::runtime_error("shared ledger for device '" + device_ + "' is full: " + std::to_string(kMaxJobs) +
                             " jobs are registered");
  }
  Slot& s = *free_slot;
  start_slot(s, layout_->next_generation++, r.name, key, 0, kNoLimit);
  s.members[0].ticket = 1;
  s.members[0].state = static_cast<std::uint32_t>(JobState::waiting);
  s.admission = kWaiting;
  s.priority = r.priority;
  s.elastic = r.elastic ? 1 : 0;
  s.preemptible = r.preemptible ? 1 : 0;
  s.need = r.need_bytes;
  s.floor = r.floor_bytes;
  s.arrival_ns = s.waiting_since_ns = s.polled_ns = now_ns();
  s.aging_s = static_cast<std::uint64_t>(std::max<std::int64_t>(0, r.aging.count()));
  s.answer_timeout_ms = static_cast<std::uint64_t>(std::max<std::int64_t>(0, r.answer_timeout.count()));
  s.state.store(kActive, std::memory_order_release);
  return JobId{static_cast<std::uint32_t>(&s - layout_->slots), s.generation, 0};
}

// The head's request to lower-priority admitted jobs (Note [Admission by plan]): targets and
// preemptions that make `deficit` bytes of room, or false when they cannot.
bool SharedLedger::ask_for_room_locked(const Slot& head, std::int32_t priority, std::size_t deficit) {
  const std::uint64_t now = now_ns();
  std::vector<Slot*> candidates;
  for (Slot& s : layout_->slots) {
    if (!is_active(s) || &s == &head || s.admission != kAdmitted || s.priority >= priority ||
        (s.elastic == 0 && s.preemptible == 0)) {
      continue;
    }
    // Note [A silent job is passed over].
    if (s.asked_at_ns != 0 && now - s.asked_at_ns > head.answer_timeout_ms * 1000000ull) s.silent = 1;
    if (s.silent == 0) candidates.push_back(&s);
  }
  // Lowest priority first; among equals the latest arrival gives first.
  std::sort(candidates.begin(), candidates.end(), [](const Slot* a, const Slot* b) {
    return a->priority != b->priority ? a->priority < b->priority : a->arrival_ns > b->arrival_ns;
  });
  std::vector<std::uint64_t> target(candidates.size(), 0);
  std::vector<bool> preempt(candidates.size(), false);
  std::size_t left = deficit;
  for (std::size_t i = 0; i < candidates.size() && left > 0; ++i) {
    const Slot& c = *candidates[i];
    const std::size_t held = footprint(c.in_use(), c.reservation);
    if (c.elastic == 0 || held <= c.floor) continue;
    const std::size_t give = std::min<std::size_t>(held - c.floor, left);
    target[i] = held - give;
    left -= give;
  }
  for (std::size_t i = 0; i < candidates.size() && left > 0; ++i) {
    const Slot& c = *candidates[i];
    if (c.preemptible == 0) continue;
    const std::size_t held = footprint(c.in_use(), c.reservation);
    const std::size_t shrink = target[i] != 0 ? held - target[i] : 0;
    left += shrink;  // counted whole instead
    left -= std::min(left, held);
    target[i] = 0;
    preempt[i] = true;
  }
  if (left > 0) return false;
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    Slot& c = *candidates[i];
    const bool asked = target[i] != 0 || preempt[i];
    if (asked && c.asked_at_ns == 0) c.asked_at_ns = now;
    if (!asked) c.asked_at_ns = 0;
    c.target = target[i];
    c.preempt = preempt[i] ? 1 : 0;
  }
  return true;
}

void SharedLedger::clear_requests_locked() {
  for (Slot& s : layout_->slots) {
    s.target = 0;
    s.preempt = 0;
    s.asked_at_ns = 0;
  }
}

AdmissionStatus SharedLedger::poll_admission(JobId ticket) {
  LockGuard guard(*this);
  reclaim_dead_locked();
  Slot& me = find_locked(ticket, "poll_admission");
  AdmissionStatus status;
  if (me.admission != kWaiting) {
    status.admitted = true;
    status.granted_bytes = static_cast<std::size_t>(me.reservation);
    return status;
  }
  const std::uint64_t now = now_ns();
  me.polled_ns = now;
  // A waiting job that has not polled within its answer timeout (stopped: Ctrl-Z, SIGSTOP) is
  // passed over until it polls again, so that it cannot hold the queue (Note [A silent job is
  // passed over]).
  std::vector<Slot*> queue;
  std::int32_t asking_priority = me.priority;
  for (Slot& s : layout_->slots) {
    if (!is_active(s) || s.admission != kWaiting) continue;
    s.silent = &s != &me && now - s.polled_ns > s.answer_timeout_ms * 1000000ull ? 1 : 0;
    if (s.silent != 0) continue;
    queue.push_back(&s);
    asking_priority = std::max(asking_priority, s.priority);
  }
  std::sort(queue.begin(), queue.end(), [now](const Slot* a, const Slot* b) {
    const std::int64_t pa = effective_priority(*a, now), pb = effective_priority(*b, now);
    return pa != pb ? pa > pb : a->arrival_ns < b->arrival_ns;
  });
  const std::size_t capacity = layout_->capacity;
  const std::size_t free = capacity - std::min(committed_locked(), capacity);
  const std::size_t position = static_cast<std::size_t>(std::find(queue.begin(), queue.end(), &me) - queue.begin());
  status.jobs_ahead = position;
  status.free_bytes = free;
  const auto admit = [&](std::size_t bytes) {
    me.reservation = bytes;
    me.admission = kAdmitted;
    me.asked = 0;
    ++me.admissions;
    if (Member* t = ticket_of(me)) t->state = static_cast<std::uint32_t>(JobState::starting);
    status.admitted = true;
    status.granted_bytes = bytes;
    status.jobs_ahead = 0;
  };
  const auto starts_small = [free](const Slot* s) { return s->elastic != 0 && s->floor <= free; };
  const auto name_silent = [&] {
    for (const Slot& s : layout_->slots) {
      if (!is_active(s) || s.silent == 0) continue;
      pid_t pid = 0;
      for (const Member& m : s.members) pid = pid == 0 ? m.pid : pid;
      std::string who = "'";
      who.append(s.name).append("' (pid ").append(std::to_string(pid)).append(")");
      status.silent.push_back(std::move(who));
    }
  };
  if (position == 0) {
    if (me.need <= free) {
      clear_requests_locked();
      admit(static_cast<std::size_t>(me.need));
    } else if (ask_for_room_locked(me, asking_priority, static_cast<std::size_t>(me.need) - free)) {
      me.asked = 1;
      status.asked_others = true;
    } else {
      clear_requests_locked();
      me.asked = 0;
      if (starts_small(&me)) admit(free);
    }
    if (!status.admitted) name_silent();
    return status;
  }
  // Backfill: the head is not starved (it asked nobody, and is younger than its aging period).
  const Slot& head = *queue.front();
  const bool head_young = head.aging_s != 0 && now - head.waiting_since_ns < head.aging_s * 1000000000ull;
  if (head.asked != 0 || !head_young) return status;
  for (std::size_t i = 0; i < position; ++i) {
    if (queue[i]->need <= free || starts_small(queue[i])) return status;  // theirs first
  }
  if (me.need <= free) {
    admit(static_cast<std::size_t>(me.need));
  } else if (starts_small(&me)) {
    admit(free);
  }
  return status;
}

void SharedLedger::requeue(JobId ticket, std::int64_t step) {
  LockGuard guard(*this);
  Slot& s = find_locked(ticket, "requeue");
  s.reservation = 0;
  s.admission = kWaiting;
  s.target = 0;
  s.preempt = 0;
  s.asked = 0;
  s.waiting_since_ns = s.polled_ns = now_ns();
  s.members[ticket.member].state = static_cast<std::uint32_t>(JobState::waiting);
  s.members[ticket.member].step = step;
}

std::uint64_t SharedLedger::admissions_of(const std::string& key) {
  const std::string stored = stored_key(key);
  LockGuard guard(*this);
  for (const Slot& s : layout_->slots) {
    if (is_active(s) && stored == s.key) return s.admissions;
  }
  throw std::runtime_error("no job '" + key + "' on ledger '" + device_ + "' (its first rank left or died)");
}

PoolRequest SharedLedger::pool_request(JobId job) {
  LockGuard guard(*this);
  Slot& me = find_locked(job, "pool_request");
  me.silent = 0;  // at a step boundary: it answers again, and has another timeout to act
  me.asked_at_ns = me.target == 0 && me.preempt == 0 ? 0 : now_ns();
  PoolRequest r;
  r.target_bytes = static_cast<std::size_t>(me.target);
  r.preempt = me.preempt != 0;
  r.reservation_bytes = static_cast<std::size_t>(me.reservation);
  for (const Slot& s : layout_->slots) {
    if (is_active(s) && s.admission == kWaiting) ++r.waiting_jobs;
  }
  const std::size_t capacity = layout_->capacity;
  r.free_bytes = capacity - std::min(committed_locked(), capacity);
  return r;
}

bool SharedLedger::set_reservation(JobId job, std::size_t bytes) {
  LockGuard guard(*this);
  reclaim_dead_locked();
  Slot& me = find_locked(job, "set_reservation");
  if (bytes <= me.reservation) {
    me.reservation = bytes;
    me.target = 0;
    return true;
  }
  // Reserving what it holds already takes nothing from anyone.
  if (bytes <= me.in_use()) {
    me.reservation = bytes;
    return true;
  }
  for (const Slot& s : layout_->slots) {
    if (is_active(s) && s.admission == kWaiting) return false;
  }
  const std::size_t others = committed_locked() - footprint(me.in_use(), me.reservation);
  if (others + footprint(me.in_use(), bytes) > layout_->capacity) return false;
  me.reservation = bytes;
  return true;
}

}  // namespace memtrain::memory
