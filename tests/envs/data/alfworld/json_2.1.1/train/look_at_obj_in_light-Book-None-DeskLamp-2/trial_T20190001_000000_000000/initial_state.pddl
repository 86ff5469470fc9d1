(define (problem look_at_obj_in_light-book-none-desklamp-2) (:domain alfred))
