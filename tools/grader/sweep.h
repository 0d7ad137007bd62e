// Finding and ending what graded code left behind: processes of the grading user, descendants of the grader,
// files in the shared temporary directories. The runner uses these after each case (where namespaces are not
// available) and after a whole grading.
#ifndef DISTLAB_TOOLS_GRADER_SWEEP_H_
#define DISTLAB_TOOLS_GRADER_SWEEP_H_

#include <sys/types.h>

#include <string>
#include <vector>

namespace distlab::grader {

// The processes whose real user id is `uid` (from /proc).
std::vector<pid_t> ProcessesOfUser(uid_t uid);

// Kills every process of `uid` (the caller must be root and uid must not be root): a child process takes that
// user id and calls kill(-1, SIGKILL), which reaches every process of the user at once, however many a fork
// bomb makes; repeated until /proc shows none. Returns how many processes there were to kill.
int KillProcessesOfUser(uid_t uid);

// Kills every descendant of this process (children, and whatever reparents to it as a child subreaper) and
// reaps them, until none is left; `except` are children to leave alone. Returns how many it killed.
int KillDescendants(const std::vector<pid_t>& except = {});

// Removes the entries of `dirs` (e.g. /tmp, /var/tmp, /dev/shm) owned by `uid`; returns their paths.
std::vector<std::string> RemoveFilesOfUser(uid_t uid, const std::vector<std::string>& dirs);

}  // namespace distlab::grader

#endif  // DISTLAB_TOOLS_GRADER_SWEEP_H_
