(define (problem pick_and_place_simple-knife-none-table-4) (:domain alfred))
