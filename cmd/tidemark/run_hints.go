package main

import (
	"errors"
	"fmt"

	"github.com/tidemark-streams/tidemark/processor"
	"github.com/tidemark-streams/tidemark/topology"
)

// runHint adds to an error that stopped the service the setting that
// addresses it, in the terms of 'tidemark run': the library's errors speak
// of the App, which has neither --create-topics nor the other flags.
func (c serviceConfig) runHint(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, processor.ErrMissingTopic) && !c.CreateTopics:
		return fmt.Errorf("%w; run with --create-topics (create_topics: true) to create the pipelines' input and output topics", err)
	case errors.Is(err, topology.ErrDeserialize) && c.DeadLetterTopic == "" && !c.SkipUndecodable:
		return fmt.Errorf("%w; to go on past undecodable records, send them to a topic with --dead-letter-topic, or drop and count them with --skip-undecodable", err)
	}
	return err
}
