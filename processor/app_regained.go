package processor

import "github.com/tidemark-streams/tidemark/topology"

// closeRegained closes the tasks of lost (revoked since the last sync) that
// want holds again: the group revoked their partitions and gave them back
// before the loop came round to close them, which happens when the loop is
// busy (a slow user function, a long batch) while another member joins and
// leaves. That member may have processed and committed them meanwhile, so
// the state this session holds predates its commits; kept running, the task
// counted on from it and lost the other member's updates. Closed, the task
// is opened again like any newly assigned one and restores from its
// changelogs.
func (s *session) closeRegained(want, lost map[topology.TaskID]bool) {
	for id := range lost {
		if !want[id] {
			continue // closed as revoked by syncTasks
		}
		if lt, ok := s.tasks[id]; ok {
			if err := lt.close(); err != nil {
				s.app.log.Warn("close revoked task", "task", id.String(), "err", err)
			}
			delete(s.tasks, id)
			s.app.metrics.forgetTask(id.String())
			s.taskState(id, taskRevoked, "assigned_again", true)
		}
		if rt, ok := s.restoring[id]; ok {
			s.stopRestore(id, rt)
			delete(s.restoring, id)
			s.app.metrics.forgetTask(id.String())
			s.taskState(id, taskRevoked, "during", "restore", "assigned_again", true)
		}
	}
}
